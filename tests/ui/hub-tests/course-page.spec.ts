/**
 * The course page through the demo hub, in Chromium.
 *
 * Given the course "Course page demo" (Mondays 10:00-11:00 UTC, taught by `instructor`,
 * taken by student1) and another course taught by `instructor2`:
 * - the instructor finds the page from the hub's home page and cancels next Monday's
 *   class; student1's spawn card then opens only for the Monday after, and the audit
 *   log names the instructor;
 * - a notice the instructor posts shows on the student's card;
 * - an extra session that overlaps a class is refused with a sentence (409);
 * - a lead time outside the admins' bounds is refused with a sentence (400);
 * - instructor2, who was never given a hub role for either course, sees their own course
 *   and is refused the other (403 with a sentence).
 *
 * Screenshots of the page in the light and the dark theme go to $COURSE_PAGE_SHOTS
 * (default /tmp/course-page-shots).
 */
import { Page } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

import { signInToHome } from '../helpers/HubHelper';
import { expect, test } from '../helpers/hubPageErrors';

const SHOTS = process.env.COURSE_PAGE_SHOTS || '/tmp/course-page-shots';
const PAGE = '/services/course-sessions/courses';
const COURSE = 'course-page-demo';
const RUNTIME =
  process.env.UI_HUB_RUNTIME ||
  path.resolve(__dirname, '..', '..', '..', '.run', 'ui-hub-tests');
const MONTHS = 'Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec'.split(' ');

test.setTimeout(180 * 1000);

async function cardStatus(page: Page): Promise<string> {
  await page.goto('/hub/spawn');
  const status = page.locator(`[data-profile="${COURSE}"] .gpus-status`);
  await expect(status).toBeVisible();
  return (await status.innerText()).trim();
}

test('an instructor cancels next Monday on the course page; the student and the audit log see it', async ({
  browser
}) => {
  fs.mkdirSync(SHOTS, { recursive: true });
  const student = await signInToHome(browser, 'student1');
  const before = await cardStatus(student.page);
  expect(before).toMatch(/^Opens /);

  const teacher = await signInToHome(browser, 'instructor');
  await teacher.page.locator('#course-page-link').click();
  await expect(teacher.page).toHaveURL(new RegExp(PAGE));
  const card = teacher.page.locator(`#course-${COURSE}`);
  await expect(card).toBeVisible();
  await teacher.page.screenshot({
    path: path.join(SHOTS, 'course-page-light.png'),
    fullPage: true
  });

  // When: the instructor cancels the first Monday class still to come.
  const monday = card
    .locator('tr[data-kind=class]')
    .filter({
      has: teacher.page.getByRole('button', { name: /Cancel the class/ })
    })
    .first();
  const day = (await monday.getAttribute('data-day')) as string;
  await monday.getByRole('button', { name: /Cancel the class/ }).click();
  await expect(teacher.page.locator('#course-message')).toContainText(
    'instructor cancelled the class of'
  );
  await expect(card.locator(`tr[data-day="${day}"]`)).toContainText(
    'Cancelled'
  );
  await expect(card.locator('[data-history]')).toContainText(
    'instructor cancelled the class of'
  );

  // Then: the student's card opens only for the Monday after.
  const following = new Date(`${day}T00:00:00Z`);
  following.setUTCDate(following.getUTCDate() + 7);
  const label = `Mon ${following.getUTCDate()} ${MONTHS[following.getUTCMonth()]}`;
  const after = await cardStatus(student.page);
  expect(after).not.toEqual(before);
  expect(after).toContain(label);

  // And the audit log names the instructor.
  const lines = fs
    .readFileSync(path.join(RUNTIME, 'course-sessions.jsonl'), 'utf-8')
    .trim()
    .split('\n')
    .map(line => JSON.parse(line));
  const entry = lines.find(
    e => e.action === 'instructor-cancel' && e.course === COURSE
  );
  expect(entry?.by).toBe('instructor');

  // When: the instructor adds an extra session on the Tuesday after, it is listed as one.
  const tuesday = new Date(`${day}T00:00:00Z`);
  tuesday.setUTCDate(tuesday.getUTCDate() + 1);
  const extraDay = tuesday.toISOString().slice(0, 10);
  const extra = card.getByRole('form', { name: 'Add an extra session' });
  await extra.locator('input[name=day]').fill(extraDay);
  await extra.locator('input[name=start]').fill('14:00');
  await extra.locator('input[name=end]').fill('15:30');
  await extra.getByRole('button', { name: 'Add extra session' }).click();
  await expect(teacher.page.locator('#course-message')).toContainText(
    'instructor added an extra session of Course page demo'
  );
  const added = card.locator(`tr[data-day="${extraDay}"][data-kind=extra]`);
  // (entered in the course's zone, UTC; told in the browser's, UTC here, with its name)
  await expect(added).toContainText('14:00 UTC–15:30 UTC');
  const times = added.locator('.course-class-time time');
  await expect(times.first()).toHaveAttribute(
    'datetime',
    `${extraDay}T14:00:00+00:00`
  );
  await expect(times.last()).toHaveAttribute(
    'datetime',
    `${extraDay}T15:30:00+00:00`
  );
  await expect(added).toContainText('Extra session');

  // When: the instructor posts a notice, the student's card shows it.
  await card
    .locator('textarea[name=notice]')
    .fill('Bring your laptop charger.');
  await card.getByRole('button', { name: 'Post notice' }).click();
  await expect(teacher.page.locator('#course-message')).toContainText(
    'instructor posted a notice'
  );
  await student.page.goto('/hub/spawn');
  await expect(
    student.page.locator(`[data-profile="${COURSE}"] [data-course-notice]`)
  ).toHaveText('Notice from your instructor: Bring your laptop charger.');

  // When: an extra session would share time with the Monday class after (10:00-11:00),
  // it is refused with a sentence naming that class and what to do (409), not merged.
  await teacher.page.goto(PAGE);
  const nextMonday = following.toISOString().slice(0, 10);
  await extra.locator('input[name=day]').fill(nextMonday);
  await extra.locator('input[name=start]').fill('10:30');
  await extra.locator('input[name=end]').fill('12:00');
  const [overlap] = await Promise.all([
    teacher.page.waitForResponse(r => r.request().method() === 'POST'),
    extra.getByRole('button', { name: 'Add extra session' }).click()
  ]);
  expect(overlap.status()).toBe(409);
  const dd = String(following.getUTCDate()).padStart(2, '0');
  const mon = MONTHS[following.getUTCMonth()];
  await expect(teacher.page.getByRole('alert')).toContainText(
    `overlaps the class of Mon ${dd} ${mon} ${following.getUTCFullYear()} 10:00-11:00 of ` +
      'Course page demo; pick a time that ends by 10:00 or starts from 11:00'
  );

  // When: a lead time outside the admins' bounds (0-30 minutes) is asked for.
  await teacher.page.goto(PAGE);
  const lead = card.locator('tr[data-timing=lead_time]');
  await lead.locator('input[name=minutes]').fill('45');
  const [refusal] = await Promise.all([
    teacher.page.waitForResponse(r => r.request().method() === 'POST'),
    lead.getByRole('button', { name: 'Set' }).click()
  ]);
  expect(refusal.status()).toBe(400);
  await expect(teacher.page.getByRole('alert')).toContainText(
    'The lead time must be between 0 minutes and 30 minutes'
  );

  // The dark theme, for the eye.
  const dark = await signInToHome(browser, 'instructor', 'dark');
  await dark.page.goto(PAGE);
  await expect(dark.page.locator(`#course-${COURSE}`)).toBeVisible();
  await dark.page.screenshot({
    path: path.join(SHOTS, 'course-page-dark.png'),
    fullPage: true
  });
  await Promise.all([student, teacher, dark].map(s => s.context.close()));
});

test('another instructor sees only their own course and is refused this one', async ({
  browser
}) => {
  const other = await signInToHome(browser, 'instructor2');
  await other.page.goto(PAGE);
  await expect(other.page.locator('#course-other-course')).toBeVisible();
  await expect(other.page.locator(`#course-${COURSE}`)).toHaveCount(0);

  // When: they post a cancellation to the other course (with their own XSRF token).
  const xsrf = await other.page
    .locator('input[name=_xsrf]')
    .first()
    .inputValue();
  const [refusal] = await Promise.all([
    other.page.waitForResponse(r => r.request().method() === 'POST'),
    other.page.evaluate(
      ({ action, token }) => {
        const form = document.createElement('form');
        form.method = 'post';
        form.action = action;
        for (const [name, value] of [
          ['_xsrf', token],
          ['day', '2030-01-07']
        ]) {
          const input = document.createElement('input');
          input.name = name;
          input.value = value;
          form.appendChild(input);
        }
        document.body.appendChild(form);
        form.submit();
      },
      { action: `${PAGE}/${COURSE}/cancel`, token: xsrf }
    )
  ]);
  expect(refusal.status()).toBe(403);
  await expect(other.page.getByRole('alert')).toContainText(
    'You do not teach Course page demo'
  );
  await other.context.close();
});

test("an instructor extends a student's server by 15 minutes; the student's server tells the new end", async ({
  browser
}) => {
  // Given student2 runs the GPU demo course (open now) from the spawn page
  const student = await signInToHome(browser, 'student2');
  await student.page.goto('/hub/home');
  if (!(await student.page.locator('#stop').isVisible())) {
    await student.page.goto('/hub/spawn');
    await student.page.locator('input[name=profile][value=gpu-demo]').check();
    await student.page.getByRole('button', { name: 'Start' }).click();
    await expect(student.page).toHaveURL(/\/user\/student2\/lab/, {
      timeout: 90 * 1000
    });
  }
  const before = await (
    await student.page.request.get('/user/student2/jupyter-to-job/api/session')
  ).json();

  // When the instructor extends it by 15 minutes on the course page
  const teacher = await signInToHome(browser, 'instructor');
  await teacher.page.goto(PAGE);
  const row = teacher.page.locator(
    '#course-gpu-demo tr[data-server-user=student2]'
  );
  const planned = (await row.locator('td[data-stops]').innerText()).slice(0, 5);
  await row.locator('input[name=minutes]').fill('15');
  await row.getByRole('button', { name: 'Extend' }).click();

  // Then the page shows the new stop time, 15 minutes later
  await expect(teacher.page.locator('#course-message')).toContainText(
    'instructor extended student2'
  );
  const [hours, minutes] = planned.split(':').map(Number);
  const later = new Date(Date.UTC(2000, 0, 1, hours, minutes + 15));
  const expected = later.toISOString().slice(11, 16);
  await expect(row.locator('td[data-stops]')).toContainText(expected);
  await expect(row.locator('td[data-stops]')).toContainText('+15 min');
  for (const scheme of ['light', 'dark'] as const) {
    await teacher.page.emulateMedia({ colorScheme: scheme });
    await teacher.page.locator('#course-gpu-demo').screenshot({
      path: path.join(SHOTS, `course-servers-${scheme}.png`)
    });
  }

  // And the student's server tells the lab's countdown the new end
  const after = await (
    await student.page.request.get('/user/student2/jupyter-to-job/api/session')
  ).json();
  const moved =
    new Date(after.session_end).getTime() -
    new Date(before.session_end).getTime();
  expect(moved).toBe(15 * 60 * 1000);

  // When the instructor stops it from the page (which leaves the hub as the other tests
  // expect it), it leaves the list, and the student has no server any more
  await teacher.page.emulateMedia({ colorScheme: 'light' });
  teacher.page.once('dialog', dialog => void dialog.accept()); // "Stop student2's server now?"
  await row.getByRole('button', { name: 'Stop' }).click();
  await expect(teacher.page.locator('#course-message')).toContainText(
    "instructor stopped student2's GPU demo course server"
  );
  await expect(row).toHaveCount(0);
  const serversLeft = async (): Promise<number> => {
    const reply = await student.page.request.get('/hub/api/user');
    return reply.ok()
      ? Object.keys((await reply.json()).servers ?? {}).length
      : -1;
  };
  await expect.poll(serversLeft, { timeout: 60 * 1000 }).toBe(0);
  await Promise.all([student, teacher].map(s => s.context.close()));
});
