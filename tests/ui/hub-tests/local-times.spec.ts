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
      // and when the course's GPU-hour budget renews (Monday 00:00 UTC)
      await expectToldIn(card.locator('.gpus-budget time'), reader);

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

test("the course page tells the class's and the servers' times in the reader's zone", async ({
  browser
}) => {
  const reader = READERS[0];
  // Given student4 runs the GPU demo course's server
  const context = await browser.newContext({
    timezoneId: reader.timezoneId,
    locale: reader.locale
  });
  const student = await context.newPage();
  await student.goto('/hub/login?next=%2Fhub%2Fspawn');
  await student.locator('input[name=username]').fill(USER);
  await student.locator('input[name=password]').fill('any password');
  await student.locator('#login_submit').click();
  await expect(student).toHaveURL(/\/hub\//);
  // (the server the test before stopped may still be stopping: its spawn page comes after)
  const course = student.locator('input[name=profile][value=gpu-demo]');
  await expect(async () => {
    await student.goto('/hub/spawn');
    await expect(course).toBeVisible({ timeout: 2000 });
  }).toPass({ timeout: 60 * 1000 });
  await course.check();
  await student.getByRole('button', { name: 'Start' }).click();
  await expect(student).toHaveURL(new RegExp(`/user/${USER}/lab`), {
    timeout: 90 * 1000
  });

  try {
    // When the course's instructor opens the course page in a New York browser
    const teacherContext = await browser.newContext({
      timezoneId: reader.timezoneId,
      locale: reader.locale
    });
    const teacher = await teacherContext.newPage();
    await teacher.goto('/hub/login?next=%2Fhub%2Fhome');
    await teacher.locator('input[name=username]').fill('instructor');
    await teacher.locator('input[name=password]').fill('any password');
    await teacher.locator('#login_submit').click();
    await expect(teacher).toHaveURL(/\/hub\/home/);
    // (the home page's hidden reclaim frame signs in to the sessions service too; two
    // sign-ins to one service at the same instant share one OAuth state cookie, so the
    // instructor moves on once the home page has loaded it, as a person would)
    await teacher.waitForLoadState('networkidle');
    await teacher.goto('/services/course-sessions/courses');
    const section = teacher.locator('#course-gpu-demo');

    // Then today's class, the server's start and stop, in the servers table and the
    // roster, are clock times of New York with its zone's name, not the course's UTC
    const today = section.locator('tr[data-kind=class]').first();
    const clockTimes = [
      today.locator('.course-class-time time').first(),
      today.locator('.course-class-time time').last(),
      section.locator(`tr[data-server-user=${USER}] time`).first(),
      section.locator(`tr[data-server-user=${USER}] [data-stops] time`),
      section
        .locator(`tr[data-student=${USER}] [data-server-state] time`)
        .first()
    ];
    for (const time of clockTimes) {
      await expectClockIn(time, reader);
    }
    for (const scheme of ['light', 'dark'] as const) {
      await teacher.emulateMedia({ colorScheme: scheme });
      await section.screenshot({
        path: path.join(
          SHOTS,
          `local-times-course-page-${reader.name}-${scheme}.png`
        )
      });
    }
    await teacherContext.close();
  } finally {
    await student.goto('/hub/home');
    await student.locator('#stop').click();
    await expect(student.locator('#start')).toBeVisible({ timeout: 60 * 1000 });
    await context.close();
  }
});

/** A clock time (data-local-time="clock") as the reader's zone tells it: "19:45 EST",
 * after the weekday where the reader's day is not the day it is listed under. */
async function expectClockIn(
  time: Locator,
  reader: (typeof READERS)[number]
): Promise<void> {
  expect(await time.getAttribute('data-local-time')).toBe('clock');
  const iso = (await time.getAttribute('datetime'))!;
  const { clock, zone } = clockAndZone(iso, reader.timezoneId, reader.locale);
  const moment = new Date(iso);
  const readersDay = new Intl.DateTimeFormat('en-CA', {
    timeZone: reader.timezoneId
  }).format(moment);
  const weekday = new Intl.DateTimeFormat('en-GB', {
    timeZone: reader.timezoneId,
    weekday: 'short'
  }).format(moment);
  const listed = await time.getAttribute('data-day');
  const expected =
    (listed && listed !== readersDay ? `${weekday} ` : '') + `${clock} ${zone}`;
  expect((await time.innerText()).trim()).toBe(expected);
  const utc = new Date(iso).toISOString().slice(11, 16);
  expect(await time.getAttribute('title')).toContain(`${utc} UTC`);
}
