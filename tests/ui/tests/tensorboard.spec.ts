/**
 * TensorBoard in JupyterLab (issue 28, item 3): a notebook, run as a job, writes a
 * scalar with tensorboardX into runs/ beside it; the person opens TensorBoard from
 * the launcher over that folder, and from the job's card over the job's folder, and
 * sees the scalar's tag in TensorBoard's Scalars view, through the server's proxy.
 * Screenshots, light and dark, at 1280x800 and 375x812.
 */
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { expect, test } from '../helpers/pageErrors';
import * as path from 'path';

import {
  notebook,
  RunAsJobHelper,
  SCREENSHOTS,
  SELECTORS
} from '../helpers/RunAsJobHelper';

const TAG = 'loss/train';

/**
 * Writes ten steps of a falling loss under runs/first-run, beside itself.
 */
const TRAINING_NOTEBOOK = notebook([
  {
    source: [
      'from tensorboardX import SummaryWriter',
      "writer = SummaryWriter('runs/first-run')",
      'for step in range(10):',
      `    writer.add_scalar('${TAG}', 1.0 / (step + 1), step)`,
      'writer.close()',
      "print('wrote', step + 1, 'steps')"
    ].join('\n')
  }
]);

/**
 * Run the notebook at `notebookPath` as a job and wait until it completed.
 */
async function runJob(
  page: IJupyterLabPageFixture,
  helper: RunAsJobHelper,
  notebookPath: string
): Promise<string> {
  await helper.createNotebook(notebookPath, TRAINING_NOTEBOOK);
  const created = await page.request.post('/jupyter-to-job/api/jobs', {
    data: { input_path: notebookPath, name: 'tensorboard training' }
  });
  expect(created.ok()).toBe(true);
  const body = await created.json();
  const jobId: string = body.job_id ?? body.job?.job_id;
  await expect
    .poll(
      async () =>
        (await (await page.request.get(`/jupyter-to-job/api/jobs/${jobId}`)).json())
          .status,
      { timeout: 120 * 1000 }
    )
    .toBe('COMPLETED');
  return jobId;
}

/**
 * The TensorBoard tab over `folder`, once its Scalars view shows `TAG`, which the
 * data over the proxy has under the run `run` (its folder below `folder`).
 */
async function expectScalarShown(
  page: IJupyterLabPageFixture,
  folder: string,
  run: string
): Promise<void> {
  const tab = page.locator(
    `.jp-JupyterToJob-tensorboard[data-folder="${folder}"]`
  );
  // (TensorBoard takes a few seconds to start: its plugins load first)
  await expect(tab).toBeVisible({ timeout: 60 * 1000 });
  const frame = tab.frameLocator('iframe');
  // TensorBoard's own page, through the proxy, lists the run's scalar by its tag.
  await expect(frame.getByText(TAG, { exact: true }).first()).toBeVisible({
    timeout: 60 * 1000
  });
  // And its data, read over the proxy from the page, has the tag under the run.
  const src = (await tab.locator('iframe').getAttribute('src')) ?? '';
  const tags = await page.evaluate(async url => {
    const response = await fetch(url + 'data/plugin/scalars/tags');
    return response.json();
  }, src);
  expect(Object.keys(tags[run] ?? {})).toContain(TAG);
}

/**
 * Whether the lab's top bar is drawn dark, once the theme's stylesheet applies.
 */
async function topBarIsDark(page: IJupyterLabPageFixture): Promise<boolean> {
  return page.evaluate(() => {
    const bar = document.querySelector('#jp-top-panel') as HTMLElement;
    const [r, g, b] = (getComputedStyle(bar).backgroundColor.match(/\d+/g) ?? [])
      .slice(0, 3)
      .map(Number);
    return (r + g + b) / 3 < 128;
  });
}

/**
 * Light and dark screenshots at 1280x800 and 375x812 (the file browser folded away
 * on the phone). The browser's scheme goes with the lab's theme: TensorBoard, in
 * its frame, follows the browser's scheme as the lab does outside the tests.
 */
async function screenshots(
  page: IJupyterLabPageFixture,
  name: string
): Promise<void> {
  for (const [width, height] of [
    [1280, 800],
    [375, 812]
  ]) {
    await page.setViewportSize({ width, height });
    if (width < 600) {
      await page.sidebar.close('left');
    }
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      if (scheme === 'dark') {
        await page.theme.setDarkTheme();
      } else {
        await page.theme.setLightTheme();
      }
      await expect.poll(() => topBarIsDark(page)).toBe(scheme === 'dark');
      await page.screenshot({
        path: path.join(SCREENSHOTS, `${name}-${width}x${height}-${scheme}.png`)
      });
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.theme.setLightTheme();
  await page.setViewportSize({ width: 1280, height: 800 });
}

test.use({ viewport: { width: 1280, height: 800 } });

test.describe('TensorBoard', () => {
  test('opens from the launcher over runs/ and shows the scalar a notebook wrote', async ({
    page,
    tmpPath
  }) => {
    // Given a notebook that wrote a scalar into runs/ beside it
    const helper = new RunAsJobHelper(page);
    await runJob(page, helper, `${tmpPath}/train.ipynb`);

    // When the person clicks Open TensorBoard in a new launcher
    await page.evaluate(() =>
      window.jupyterapp.commands.execute('launcher:create')
    );
    const card = page
      .locator('.jp-Launcher')
      .getByRole('button', { name: 'Open TensorBoard…', exact: true });
    await expect(card).toHaveCount(1);
    await card.click();

    // Then a dialog offers runs/; they name the notebook's runs/ folder and open it
    const dialog = page.locator('.jp-Dialog');
    const folder = dialog.getByTestId('tensorboard-folder');
    await expect(folder).toHaveValue('runs');
    await folder.fill(`${tmpPath}/runs`);
    await dialog.getByRole('button', { name: 'Open', exact: true }).click();

    // And TensorBoard opens in a tab with the scalar's tag in its Scalars view
    await expectScalarShown(page, `${tmpPath}/runs`, 'first-run');
    await expect(
      page.locator('.lm-TabBar-tab.lm-mod-current', {
        hasText: `TensorBoard: ${tmpPath}/runs`
      })
    ).toBeVisible();
    await screenshots(page, 'tensorboard-launcher');

    // And opening the same folder again brings the same tab forward
    await page.evaluate(
      folder =>
        window.jupyterapp.commands.execute('jupyter-to-job:open-tensorboard', {
          folder
        }),
      `${tmpPath}/runs`
    );
    await expect(
      page.locator(`.jp-JupyterToJob-tensorboard[data-folder="${tmpPath}/runs"]`)
    ).toHaveCount(1);
  });

  test('a folder that is not there is named in a message, and nothing opens', async ({
    page,
    tmpPath
  }) => {
    await page.evaluate(
      folder =>
        window.jupyterapp.commands.execute('jupyter-to-job:open-tensorboard', {
          folder
        }),
      `${tmpPath}/no-runs-here`
    );
    await expect(
      page.getByText(
        `TensorBoard did not open: There is no folder '${tmpPath}/no-runs-here'`
      )
    ).toBeVisible();
    await expect(page.locator('.jp-JupyterToJob-tensorboard')).toHaveCount(0);
  });

  test('opens from a job’s card over the job’s folder and shows its scalar', async ({
    page,
    tmpPath
  }) => {
    // Given a job that wrote a scalar beside its notebook
    const helper = new RunAsJobHelper(page);
    const jobId = await runJob(page, helper, `${tmpPath}/train.ipynb`);

    // When the person opens the job in the Jobs panel and clicks TensorBoard on it
    await page.evaluate(
      jobId =>
        window.jupyterapp.commands.execute('jupyter-to-job:open-jobs-panel', {
          jobId
        }),
      jobId
    );
    const detail = page
      .locator(SELECTORS.JOBS_PANEL)
      .locator(`[data-testid="job-detail"][data-job-id="${jobId}"]`);
    await expect(detail).toBeVisible();
    await screenshots(page, 'tensorboard-job-card');
    await detail.getByTestId('job-action-tensorboard').click();

    // Then TensorBoard opens over the job's folder, with the job's scalar
    await expectScalarShown(page, tmpPath, 'runs/first-run');
    await screenshots(page, 'tensorboard-job');
  });
});
