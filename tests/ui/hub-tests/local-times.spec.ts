/**
 * Times on the hub's pages in the reader's own zone, through the demo hub, in Chromium.
 *
 * The GPU demo course's times are UTC. Given student4 reads the spawn page in a browser
 * set to New York (en-US), and again set to Tokyo (ja-JP):
 * - "Open until …" and "A server started now stops at …" show the clock time of that
 *   zone, with the zone's short name as the browser writes it ("EST", "JST"), and no
 *   longer the course's UTC;
 * - each time keeps its moment in a machine-readable datetime, and the course's own
 *   time (what the page says without scripts) in its title;
 * - no script on the page throws.
 * Then, with a server started, the home page tells when the hub stops it in the same way.
 * Screenshots: test-artifacts/ui/local-times-{new-york,tokyo}-{light,dark}.png (the GPU
 * demo card).
 */
import * as fs from 'fs';
import * as path from 'path';

import { Locator } from '@playwright/test';

import { expect, test } from '../helpers/hubPageErrors';

const USER = 'student4';
const SHOTS =
  process.env.UI_ARTIFACTS_DIR ||
  path.resolve(__dirname, '..', '..', '..', 'test-artifacts', 'ui');
const READERS = [
  { name: 'new-york', timezoneId: 'America/New_York', locale: 'en-US' },
  { name: 'tokyo', timezoneId: 'Asia/Tokyo', locale: 'ja-JP' }
];

test.setTimeout(120 * 1000);

/** The clock time ("09:51") and the zone's short name ("EST") of `iso` for a reader in
 * `timezoneId` with `locale`, as Node's Intl tells them. */
function clockAndZone(iso: string, timezoneId: string, locale: string) {
  const moment = new Date(iso);
  const clock = new Intl.DateTimeFormat('en-GB', {
    timeZone: timezoneId,
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23'
  }).format(moment);
  const zone = new Intl.DateTimeFormat(locale, {
    timeZone: timezoneId,
    timeZoneName: 'short'
  })
    .formatToParts(moment)
    .find(part => part.type === 'timeZoneName')!.value;
  return { clock, zone };
}

async function expectToldIn(
  time: Locator,
  reader: (typeof READERS)[number]
): Promise<void> {
  const iso = (await time.getAttribute('datetime'))!;
  expect(iso).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
  const { clock, zone } = clockAndZone(iso, reader.timezoneId, reader.locale);
  const shown = (await time.innerText()).trim();
  expect(
    shown.endsWith(`${clock} ${zone}`),
    `"${shown}" is not ${clock} ${zone}`
  ).toBe(true);
  expect(shown).not.toContain('UTC');
  // The course's own time stays at hand.
  const utc = new Date(iso).toISOString().slice(11, 16);
  expect(await time.getAttribute('title')).toContain(`${utc} UTC`);
}

for (const reader of READERS) {
  test(`a reader in ${reader.timezoneId} reads the course's times in their own zone`, async ({
    browser
  }) => {
    fs.mkdirSync(SHOTS, { recursive: true });
    for (const scheme of ['light', 'dark'] as const) {
      const context = await browser.newContext({
        colorScheme: scheme,
        timezoneId: reader.timezoneId,
        locale: reader.locale
      });
      const page = await context.newPage();
      await page.goto('/hub/login?next=%2Fhub%2Fspawn');
      await page.locator('input[name=username]').fill(USER);
      await page.locator('input[name=password]').fill('any password');
      await page.locator('#login_submit').click();

      const card = page.locator('[data-profile="gpu-demo"]');
      await expect(card).toBeVisible();
      const status = card.locator('.gpus-status');
      await expect(status).toContainText(/^Open until /);
      await expectToldIn(status.locator('time'), reader);
      await expectToldIn(card.locator('.gpus-stops time'), reader);

      await card.screenshot({
        path: path.join(SHOTS, `local-times-${reader.name}-${scheme}.png`)
      });
      await context.close();
    }
  });
}

test("the home page tells when the hub stops the reader's server in their own zone", async ({
  browser
}) => {
  // Given student4, in a browser set to New York, starts the GPU demo course
  const reader = READERS[0];
  const context = await browser.newContext({
    timezoneId: reader.timezoneId,
    locale: reader.locale
  });
  const page = await context.newPage();
  await page.goto('/hub/login?next=%2Fhub%2Fspawn');
  await page.locator('input[name=username]').fill(USER);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('#login_submit').click();
  await page.locator('input[name=profile][value=gpu-demo]').check();
  await page.getByRole('button', { name: 'Start' }).click();
  await expect(page).toHaveURL(new RegExp(`/user/${USER}/lab`), {
    timeout: 90 * 1000
  });

  // When they open the hub's home page
  await page.goto('/hub/home');

  // Then the stop time is New York's, named, with the course's UTC at hand
  await expectToldIn(page.locator('[data-stops] time'), reader);

  // (and the server stops again, for the other tests of this hub)
  await page.locator('#stop').click();
  await expect(page.locator('#start')).toBeVisible({ timeout: 60 * 1000 });
  await context.close();
});
