/**
 * Through the demo hub (hub_config/local/): the Jobs panel shows only the actions the
 * viewer's role may take. A student of the GPU demo course runs a job; the course's
 * instructor, who may read their students' jobs, sees it in their own Jobs panel with its
 * owner, and without Stop, Delete or Rerun.
 *
 * Plain Playwright, as demo-hub.spec.ts (JupyterLab behind the hub).
 */
import { Browser, Page } from '@playwright/test';
import { expect, test } from '../helpers/hubPageErrors';
import * as path from 'path';

import { notebook, SCREENSHOTS, SELECTORS } from '../helpers/RunAsJobHelper';

const STUDENT = 'student3';
const INSTRUCTOR = 'instructor';
const NOTEBOOK = 'roles-homework.ipynb';

test.setTimeout(180 * 1000);

/**
 * Log in to the demo hub (any password) and start a CPU-only server; the page ends
 * in the user's JupyterLab.
 */
async function startLab(browser: Browser, user: string): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  await page.goto('/hub/login');
  await page.locator('input[name=username]').fill(user);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('#login_submit').click();
  await expect(page).toHaveURL(/\/hub\/spawn/);
  await page.locator('input[name=profile][value=cpu]').check();
  await page.getByRole('button', { name: 'Start' }).click();
  await expect(page).toHaveURL(new RegExp(`/user/${user}/lab`), {
    timeout: 60 * 1000
  });
  await expect(page.locator('#jp-main-dock-panel')).toBeVisible({
    timeout: 60 * 1000
  });
  return page;
}

/**
 * Open JupyterLab's command palette (its shortcut works once the lab has started).
 */
async function openPalette(page: Page): Promise<void> {
  // (the lab has restored its layout once a tab of the main area shows)
  await expect(
    page.locator('#jp-main-dock-panel .lm-TabBar-tab').first()
  ).toBeVisible({
    timeout: 60 * 1000
  });
  const palette = page.locator('#modal-command-palette');
  await expect(async () => {
    await page.keyboard.press('Control+Shift+C');
    await expect(palette).toBeVisible({ timeout: 5 * 1000 });
  }).toPass();
}

/**
 * A request to the user's server with the xsrf cookie the browser holds.
 */
async function serverRequest(
  page: Page,
  user: string,
  method: 'GET' | 'POST' | 'PUT',
  address: string,
  data?: Record<string, unknown>
) {
  const cookies = await page.context().cookies();
  const xsrf = cookies.find(cookie => cookie.name === '_xsrf')?.value ?? '';
  return page.request.fetch(`/user/${user}/${address}`, {
    method,
    headers: { 'X-XSRFToken': xsrf },
    data
  });
}

test('an instructor sees a student’s job with its owner, and no Stop, Delete or Rerun', async ({
  browser
}) => {
  // Given a student who ran a job from a notebook of theirs
  const student = await startLab(browser, STUDENT);
  const saved = await serverRequest(
    student,
    STUDENT,
    'PUT',
    `api/contents/${NOTEBOOK}`,
    {
      type: 'notebook',
      format: 'json',
      content: notebook([{ source: "print('homework done', flush=True)" }])
    }
  );
  expect(saved.status(), await saved.text()).toBeLessThan(300);
  const created = await serverRequest(
    student,
    STUDENT,
    'POST',
    'jupyter-to-job/api/jobs',
    { input_path: NOTEBOOK, name: 'homework', flavor: 'cpu-job' }
  );
  expect(created.status(), await created.text()).toBe(201);
  const jobId: string = (await created.json()).job_id;
  await expect
    .poll(
      async () =>
        (
          await (
            await serverRequest(
              student,
              STUDENT,
              'GET',
              `jupyter-to-job/api/jobs/${jobId}`
            )
          ).json()
        ).status,
      { timeout: 60 * 1000 }
    )
    .toBe('COMPLETED');

  // When their instructor opens the Jobs panel in their own JupyterLab
  const instructor = await startLab(browser, INSTRUCTOR);
  const palette = instructor.locator('#modal-command-palette');
  await openPalette(instructor);
  await palette.locator('input').fill('Jobs');
  await palette
    .locator('[data-command="jupyter-to-job:open-jobs-panel"]')
    .first()
    .click();
  const panel = instructor.locator(SELECTORS.JOBS_PANEL);

  // Then the student's job is listed with an Owner column naming the student
  const row = panel.locator(`[data-testid="job-row"][data-job-id="${jobId}"]`);
  await expect(row).toBeVisible({ timeout: 30 * 1000 });
  await expect(panel.getByTestId('jobs-owner-header')).toHaveText('Owner');
  await expect(row.getByTestId('job-owner')).toHaveText(STUDENT);
  await expect(row).toContainText('CPU job'); // the flavor's title, not its id

  // And its detail names the owner and offers no action the instructor may not take
  await row.click();
  const detail = panel.getByTestId('job-detail');
  await expect(detail).toHaveAttribute('data-job-id', jobId);
  await expect(detail.getByTestId('job-detail-owner')).toHaveText(STUDENT);
  await expect(detail.getByTestId('job-not-yours')).toContainText(
    `This is ${STUDENT}’s job`
  );
  for (const action of ['stop', 'delete', 'rerun']) {
    await expect(detail.getByTestId(`job-action-${action}`)).toHaveCount(0);
  }
  // while reading it is theirs: the log and the executed notebook
  await expect(detail.getByTestId('job-log')).toContainText('homework done');
  await expect(detail.getByTestId('job-action-open-notebook')).toBeVisible();
  // (JupyterLab's own question about news would hide part of the panel)
  const news = instructor.locator('.Toastify__toast', {
    hasText: 'Jupyter news'
  });
  if (await news.isVisible()) {
    await news.getByRole('button', { name: 'No', exact: true }).click();
    await expect(news).toBeHidden();
  }
  await instructor.screenshot({
    path: path.join(SCREENSHOTS, 'jobs-panel-instructor-light.png')
  });
  // (the lab follows the system's dark scheme)
  await instructor.emulateMedia({ colorScheme: 'dark' });
  await expect(instructor.locator('body')).toHaveAttribute(
    'data-jp-theme-light',
    'false'
  );
  // (the lab reloads in the new theme, with the Jobs panel where it was)
  await expect(instructor.locator('#jupyterlab-splash')).toHaveCount(0, {
    timeout: 60 * 1000
  });
  await row.click();
  await expect(detail).toHaveAttribute('data-job-id', jobId);
  await expect(detail.getByTestId('job-log')).toContainText('homework done');
  await instructor.screenshot({
    path: path.join(SCREENSHOTS, 'jobs-panel-instructor-dark.png')
  });

  // And a rerun that still reaches the server is refused as someone else's job, not
  // as a notebook missing from the instructor's files
  const rerun = await serverRequest(
    instructor,
    INSTRUCTOR,
    'POST',
    'jupyter-to-job/api/jobs',
    { input_path: NOTEBOOK, name: 'homework', rerun_of: jobId }
  );
  expect(rerun.status()).toBe(403);
  expect((await rerun.json()).message).toMatch(
    new RegExp(`^This is ${STUDENT}'s job; you can read it but not rerun it\\.`)
  );

  // Both servers stop, so the next tests of this hub find these people without one
  await stopServer(instructor);
  await stopServer(student);
});

/**
 * Stop the user's server from the hub's home page, and wait until it has stopped.
 */
async function stopServer(page: Page): Promise<void> {
  await page.goto('/hub/home');
  await page.locator('#stop').click();
  await expect(page.locator('#stop')).toBeHidden({ timeout: 60 * 1000 });
}
