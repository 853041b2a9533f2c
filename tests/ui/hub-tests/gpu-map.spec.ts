/**
 * The GPU map page through the demo hub, in Chromium, as each role sees it.
 *
 * Two students start the GPU demo course (a quarter GPU each) and one of them runs a
 * notebook as a job on a quarter GPU, which stays running while the test looks: the map
 * then holds two servers and a job. The admin sees every name and the job's id; the
 * course's instructor sees the names of the course's students (the job, not a course
 * slice, stays anonymous); a student sees their own slices as "you" and the other student
 * only as "another user" of the GPU demo course. The page is opened from the hub's
 * Services menu and from the link on the hub's home page, and it redraws by itself: a
 * slice that ends leaves the page without a reload.
 *
 * Screenshots of each role, in the light and the dark theme, go to $GPUMAP_SHOTS
 * (default /tmp/gpumap-shots).
 */
import { BrowserContext, Page } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

import { signInToHome } from '../helpers/HubHelper';
import { expect, test } from '../helpers/hubPageErrors';
import { notebook } from '../helpers/RunAsJobHelper';

const SHOTS = process.env.GPUMAP_SHOTS || '/tmp/gpumap-shots';
const MAP = '/services/course-sessions/gpus';
const COURSE = 'GPU demo course';
// student3 runs a server and a job; student1 (whose server other hub tests may
// have started already) a server.
const RUNNER = 'student3';
const CLASSMATE = 'student1';
const NOTEBOOK = 'gpu-map-sleeper.ipynb';

test.setTimeout(240 * 1000);

async function startCourseServer(page: Page, user: string): Promise<void> {
  await page.goto('/hub/home');
  if (await page.locator('#stop').isVisible()) {
    return; // already running (another test of this hub started it)
  }
  await page.goto('/hub/spawn');
  await page.locator('input[name=profile][value=gpu-demo]').check();
  await page.getByRole('button', { name: 'Start' }).click();
  await expect(page).toHaveURL(new RegExp(`/user/${user}/lab`), {
    timeout: 90 * 1000
  });
}

/** The XSRF token of the user's own server (the hub's cookie has the same name). */
async function serverXsrf(
  context: BrowserContext,
  user: string
): Promise<string> {
  const cookies = await context.cookies();
  const cookie = cookies.find(
    c => c.name === '_xsrf' && c.path.startsWith(`/user/${user}`)
  );
  return cookie?.value ?? '';
}

/** Run a notebook that sleeps for minutes as a job on a quarter GPU, through the user's
 * server (its Run as Job relay), as the dialog does. */
async function startSleepingJob(page: Page, user: string): Promise<string> {
  const headers = { 'X-XSRFToken': await serverXsrf(page.context(), user) };
  const saved = await page.request.put(
    `/user/${user}/api/contents/${NOTEBOOK}`,
    {
      headers,
      data: {
        type: 'notebook',
        format: 'json',
        // Short cells, so that stopping the job (after its current cell) is quick.
        content: notebook([
          { source: 'import time' },
          ...Array.from({ length: 280 }, () => ({ source: 'time.sleep(1)' }))
        ])
      }
    }
  );
  expect(saved.status(), await saved.text()).toBeLessThan(300);
  const created = await page.request.post(
    `/user/${user}/jupyter-to-job/api/jobs`,
    {
      headers,
      data: {
        input_path: NOTEBOOK,
        flavor: 'quarter-gpu',
        deadline_seconds: 300
      }
    }
  );
  expect(created.status(), await created.text()).toBeLessThan(300);
  return (await created.json()).job_id;
}

/** The map's table rows as text: "holder | runs | course | share | memory". */
async function rows(page: Page): Promise<string[]> {
  return page.locator('.gpumap-table tbody tr').evaluateAll(trs =>
    trs.map(tr =>
      Array.from(tr.querySelectorAll('td'))
        .map(td => (td.textContent || '').trim())
        .join(' | ')
    )
  );
}

/** How many rows begin with ``prefix``. */
function count(found: string[], prefix: string): number {
  return found.filter(row => row.startsWith(prefix)).length;
}

async function openMap(page: Page): Promise<void> {
  await page.goto(MAP);
  await expect(
    page.getByRole('heading', { name: 'GPU map', level: 1 })
  ).toBeVisible();
}

async function shot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, name), fullPage: true });
}

test('the GPU map names holders by role: admin, instructor and student', async ({
  browser
}) => {
  // Given two students of the GPU demo course run its server, and one also runs a job
  const runner = await signInToHome(browser, RUNNER);
  await startCourseServer(runner.page, RUNNER);
  const jobId = await startSleepingJob(runner.page, RUNNER);
  const classmate = await signInToHome(browser, CLASSMATE);
  await startCourseServer(classmate.page, CLASSMATE);

  // When the admin opens the map from the hub's Services menu
  const admin = await signInToHome(browser, 'admin');
  await admin.page.getByRole('button', { name: 'Services' }).click();
  await admin.page
    .locator('nav .dropdown-menu')
    .getByRole('link', { name: 'GPU map' })
    .click();
  await expect(admin.page).toHaveURL(new RegExp(`${MAP}$`));
  await expect(
    admin.page.getByRole('heading', { name: 'GPU map', level: 1 })
  ).toBeVisible();

  // Then they see both servers and the job, each with its holder, and the job's id
  const runnerJob = `${RUNNER} | job ${jobId} | A quarter GPU |`;
  await expect
    .poll(async () => count(await rows(admin.page), runnerJob), {
      timeout: 60 * 1000
    })
    .toBe(1);
  const adminRows = await rows(admin.page);
  expect(count(adminRows, `${RUNNER} | server | ${COURSE} |`)).toBe(1);
  expect(count(adminRows, `${CLASSMATE} | server | ${COURSE} |`)).toBe(1);
  expect(count(adminRows, 'another user')).toBe(0);
  await expect(admin.page.locator('#gpumap-rule')).toContainText(
    'As a hub admin'
  );
  await shot(admin.page, 'admin-light.png');

  // And the instructor sees their students' names on the course's servers; the job,
  // not run for the course, stays anonymous and shows no id
  const instructor = await signInToHome(browser, 'instructor');
  await openMap(instructor.page);
  const instructorRows = await rows(instructor.page);
  expect(count(instructorRows, `${RUNNER} | server | ${COURSE} |`)).toBe(1);
  expect(count(instructorRows, `${CLASSMATE} | server | ${COURSE} |`)).toBe(1);
  expect(
    count(instructorRows, 'another user | job | A quarter GPU |')
  ).toBeGreaterThanOrEqual(1);
  expect(await instructor.page.locator('#gpumap').innerText()).not.toContain(
    jobId
  );
  await expect(instructor.page.locator('#gpumap-rule')).toContainText(
    'the students in the courses you teach'
  );
  await shot(instructor.page, 'instructor-light.png');

  // And a student sees their own server as "you", and the others' slices, the job
  // included, only by course or flavor
  await openMap(classmate.page);
  const studentRows = await rows(classmate.page);
  expect(count(studentRows, `you | server | ${COURSE} |`)).toBe(1);
  expect(
    count(studentRows, `another user | server | ${COURSE} |`)
  ).toBeGreaterThanOrEqual(1);
  expect(
    count(studentRows, 'another user | job | A quarter GPU |')
  ).toBeGreaterThanOrEqual(1);
  const studentText = await classmate.page.locator('#gpumap').innerText();
  expect(studentText).not.toContain(RUNNER);
  expect(studentText).not.toContain(jobId);
  await shot(classmate.page, 'student-light.png');

  // And the job's owner, following the link on the hub's home page, sees both of their
  // slices as "you", the job with its id
  await runner.page.goto('/hub/home');
  await runner.page.waitForLoadState('networkidle');
  await runner.page.getByRole('link', { name: /GPU map/ }).click();
  await expect(runner.page).toHaveURL(new RegExp(`${MAP}$`));
  const ownRows = await rows(runner.page);
  expect(count(ownRows, `you | server | ${COURSE} |`)).toBe(1);
  expect(count(ownRows, `you | job ${jobId} | A quarter GPU |`)).toBe(1);
  expect(await runner.page.locator('#gpumap').innerText()).not.toContain(
    CLASSMATE
  );

  // In the dark theme too, for each role
  for (const user of ['admin', 'instructor', CLASSMATE]) {
    const dark = await signInToHome(browser, user, 'dark');
    await openMap(dark.page);
    await expect(dark.page.locator('html')).toHaveAttribute(
      'data-bs-theme',
      'dark'
    );
    const role = user === CLASSMATE ? 'student' : user;
    await shot(dark.page, `${role}-dark.png`);
    await dark.context.close();
  }

  // When the job is stopped and its owner stops their server, the admin's open map
  // redraws without a reload: the server's slice is gone
  await runner.page.request.patch(
    `/user/${RUNNER}/jupyter-to-job/api/jobs/${jobId}`,
    {
      headers: { 'X-XSRFToken': await serverXsrf(runner.context, RUNNER) },
      data: { status: 'STOPPED' }
    }
  );
  await runner.page.goto('/hub/home');
  await runner.page.locator('#stop').click();
  await expect(runner.page.locator('#start')).toBeVisible({
    timeout: 60 * 1000
  });
  await expect
    .poll(
      async () =>
        count(await rows(admin.page), `${RUNNER} | server | ${COURSE} |`),
      { timeout: 60 * 1000 }
    )
    .toBe(0);
  expect(count(await rows(admin.page), `${CLASSMATE} | server |`)).toBe(1);
});
