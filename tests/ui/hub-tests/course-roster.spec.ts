/**
 * The course page as the instructor's everyday tool, through the demo hub, in Chromium.
 *
 * Given student3 runs the GPU demo course (taught by `instructor`):
 * - the course page wears the hub's own header (Home, Token, the dark-mode toggle, the
 *   instructor's name), and lists student3 in its roster with their server, share and
 *   GPU-hours this week, with the course's environments;
 * - Stop asks first: declined, nothing happens; confirmed, student3's server is stopped
 *   without the page reloading (a marker set on the window survives), its row leaves the
 *   list, the roster says "No server", and the seats read in plural;
 * - the CSV report downloads, and the JSON report opens, from the browser session (no
 *   token);
 * - the page does not scroll sideways at 1280x800 nor at 375x812;
 * - no script on these pages throws.
 * Screenshots: test-artifacts/ui/course-page-{1280x800,375x812}-{light,dark}.png.
 */
import * as fs from 'fs';
import * as path from 'path';

import { signInToHome } from '../helpers/HubHelper';
import { expect, test } from '../helpers/hubPageErrors';

const PAGE = '/services/course-sessions/courses';
const STUDENT = 'student3';
const SHOTS =
  process.env.UI_ARTIFACTS_DIR ||
  path.resolve(__dirname, '..', '..', '..', 'test-artifacts', 'ui');

test.setTimeout(240 * 1000);

test("the instructor stops a student's server after confirming, without a reload, and downloads the CSV report", async ({
  browser
}) => {
  fs.mkdirSync(SHOTS, { recursive: true });
  // Given student3 runs the GPU demo course
  const student = await signInToHome(browser, STUDENT);
  if (!(await student.page.locator('#stop').isVisible())) {
    await student.page.goto('/hub/spawn');
    await student.page.locator('input[name=profile][value=gpu-demo]').check();
    await student.page.getByRole('button', { name: 'Start' }).click();
    await expect(student.page).toHaveURL(new RegExp(`/user/${STUDENT}/lab`), {
      timeout: 90 * 1000
    });
  }

  // When the instructor opens the course page from the hub's home page
  const teacher = await signInToHome(browser, 'instructor');
  const page = teacher.page;
  await page.locator('#course-page-link').click();
  await expect(page).toHaveURL(new RegExp(PAGE));
  const card = page.locator('#course-gpu-demo');

  // Then the page has the hub's header and navigation
  const nav = page.locator('nav.navbar');
  await expect(nav.getByRole('link', { name: 'Home' })).toHaveAttribute(
    'href',
    '/hub/home'
  );
  await expect(nav.getByRole('link', { name: 'Token' })).toBeVisible();
  await expect(nav.locator('#dark-theme-toggle')).toBeVisible();
  await expect(nav.locator('#login_widget')).toContainText('instructor');
  // And the roster lists student3's server, share and GPU-hours this week
  const roster = card.locator(`tr[data-student="${STUDENT}"]`);
  await expect(roster.locator('[data-server-state]')).toContainText(
    'Running since'
  );
  await expect(roster.locator('[data-share]')).toContainText('1/4 of');
  await expect(roster.locator('[data-week-hours]')).toHaveText(/^\d+\.\d$/);
  await expect(card.locator('[data-environments]')).toContainText(
    'Standard Python'
  );

  for (const size of [
    { width: 1280, height: 800 },
    { width: 375, height: 812 }
  ]) {
    await page.setViewportSize(size);
    // (wide tables scroll inside their own box, not the page)
    const { scrollWidth, clientWidth } = await page.evaluate(() => ({
      scrollWidth: document.documentElement.scrollWidth,
      clientWidth: document.documentElement.clientWidth
    }));
    expect(
      scrollWidth,
      `at ${size.width} px the course page is ${scrollWidth} px wide`
    ).toBeLessThanOrEqual(clientWidth);
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await page.screenshot({
        path: path.join(
          SHOTS,
          `course-page-${size.width}x${size.height}-${scheme}.png`
        ),
        fullPage: true
      });
    }
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.emulateMedia({ colorScheme: 'light' });

  // When the instructor clicks Stop and declines the question
  await page.evaluate(() => {
    (window as any).courseMarker = 'still the same page';
  });
  const row = card.locator(`tr[data-server-user="${STUDENT}"]`);
  const asked: string[] = [];
  page.once('dialog', dialog => {
    asked.push(dialog.message());
    void dialog.dismiss();
  });
  await row.getByRole('button', { name: 'Stop' }).click();
  // Then nothing is stopped
  expect(asked).toEqual([
    `Stop ${STUDENT}'s server now? Whatever they have not saved in their notebooks is lost.`
  ]);
  await expect(row).toHaveCount(1);

  // When they click Stop again and confirm
  page.once('dialog', dialog => void dialog.accept());
  await row.getByRole('button', { name: 'Stop' }).click();

  // Then the page says so, without reloading, and the row leaves the list
  await expect(page.locator('#course-message')).toContainText(
    `instructor stopped ${STUDENT}'s GPU demo course server`
  );
  await expect(row).toHaveCount(0);
  await expect(roster.locator('[data-server-state]')).toHaveText('No server');
  await expect(card.locator('[data-seats]')).toContainText('GPU seats in use');
  expect(await page.evaluate(() => (window as any).courseMarker)).toBe(
    'still the same page'
  );
  // And the hub stops the server
  const serversLeft = async (): Promise<number> => {
    const reply = await student.page.request.get('/hub/api/user');
    return reply.ok()
      ? Object.keys((await reply.json()).servers ?? {}).length
      : -1;
  };
  await expect.poll(serversLeft, { timeout: 60 * 1000 }).toBe(0);

  // When the instructor downloads the CSV report from the page (no token, the
  // browser's sign-in)
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    card.locator('a[data-report=csv]').click()
  ]);
  const csv = fs.readFileSync((await download.path())!, 'utf-8');
  // Then it is the GPU-hours by student, a header row first
  expect(csv.split('\n')[0]).toMatch(/^user,from,to,server_gpu_hours,/);
  expect(download.suggestedFilename()).toMatch(/\.csv$/);

  // And the JSON report opens in the browser
  const [json] = await Promise.all([
    page.waitForResponse(r => r.url().includes('format=json')),
    card.locator('a[data-report=json]').click()
  ]);
  expect(json.status()).toBe(200);
  expect((await json.json()).by).toBe('user');

  await Promise.all([student, teacher].map(s => s.context.close()));
});
