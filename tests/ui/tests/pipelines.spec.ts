/**
 * Pipelines in JupyterLab: a student opens notebooks, arranges them into stages in
 * the builder, runs them and follows the pipeline in the Jobs panel's Pipelines tab;
 * saves it as a template and reruns it from the file browser with another value; and
 * sees a failed pipeline say which job failed, which was stopped and what was skipped.
 * The server is JupyterLab with the standalone job back end (real kernels).
 */
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { expect, test } from '../helpers/pageErrors';
import { Locator } from '@playwright/test';

import {
  notebook,
  repeatEveryMinute,
  RunAsJobHelper,
  SELECTORS
} from '../helpers/RunAsJobHelper';

const RUN_PIPELINE = 'jupyter-to-job:run-pipeline';

/**
 * Writes the message into the pipeline's shared folder for the next stage.
 */
const PREPARE = notebook([
  { source: "message = 'hello'", tags: ['parameters'] },
  {
    source:
      'import os, pathlib\n' +
      "shared = pathlib.Path(os.environ['JUPYTER_TO_JOB_PIPELINE_DIR'])\n" +
      "(shared / 'message.txt').write_text(message)"
  }
]);

/**
 * Reads what the stage before wrote.
 */
const TRAIN = notebook([
  {
    source:
      'import os, pathlib\n' +
      "shared = pathlib.Path(os.environ['JUPYTER_TO_JOB_PIPELINE_DIR'])\n" +
      "print('read', (shared / 'message.txt').read_text(), flush=True)"
  }
]);

const FAILING = notebook([
  { source: 'x = 1' },
  { source: 'y = 2' },
  { source: "raise ValueError('bad split')" }
]);

const SLOW = notebook([
  { source: 'import time' },
  { source: 'for i in range(300):\n    time.sleep(1)' }
]);

const REPORT = notebook([{ source: "print('report')" }]);

/**
 * Open each notebook (in this order), then the builder from the notebook toolbar.
 */
async function openBuilder(
  page: IJupyterLabPageFixture,
  paths: string[]
): Promise<Locator> {
  for (const notebookPath of paths) {
    expect(await page.notebook.openByPath(notebookPath)).toBe(true);
  }
  // The toolbar of the notebook in front (the others' are hidden).
  await page
    .locator(`.jp-NotebookPanel-toolbar [data-command="${RUN_PIPELINE}"]`)
    .filter({ visible: true })
    .click();
  const dialog = page.locator('.jp-Dialog.jp-JupyterToJob-builderDialog');
  // Notebooks JupyterLab marked changed on opening are saved first, on request.
  const save = page.locator('.jp-Dialog', {
    hasText: 'Save the notebooks first?'
  });
  await expect(save.or(dialog)).toBeVisible();
  if (await save.isVisible()) {
    await save.getByRole('button', { name: 'Save and Continue' }).click();
  }
  await expect(dialog).toBeVisible();
  await expect(dialog.getByTestId('flavor-picker')).toHaveAttribute(
    'data-state',
    'loaded'
  );
  return dialog;
}

/**
 * Write the prepare and train notebooks into `folder`, then open the builder over
 * them (one stage each).
 */
async function builderOverPrepareAndTrain(
  jobs: RunAsJobHelper,
  folder: string
): Promise<Locator> {
  const paths = [`${folder}/prepare.ipynb`, `${folder}/train.ipynb`];
  await jobs.createNotebook(paths[0], PREPARE);
  await jobs.createNotebook(paths[1], TRAIN);
  return openBuilder(jobs.page, paths);
}

test.describe('Pipelines from the open notebooks', () => {
  test.setTimeout(300 * 1000);

  test('a two-stage pipeline passes a file on and completes; its template reruns with another value', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);

    // Given the builder over her two open notebooks: one stage each
    const dialog = await builderOverPrepareAndTrain(jobs, tmpPath);
    await expect(dialog.getByTestId('builder-stage')).toHaveCount(2);
    await dialog.getByTestId('builder-name').fill('prepare and train');
    await jobs.screenshotsLightAndDark('pipeline-builder');

    // When she saves it as a template, then runs it
    await dialog.locator('.jp-JupyterToJob-saveTemplate').click();
    await expect(dialog.getByTestId('builder-saved')).toContainText(
      `${tmpPath}/prepare-and-train.pipeline.yaml`
    );
    await dialog.locator(SELECTORS.SUBMIT).click();
    await expect(dialog).toBeHidden({ timeout: 30 * 1000 });

    // Then the Pipelines tab follows it to its end, stage after stage
    const panel = page.locator(SELECTORS.JOBS_PANEL);
    const { card: pipeline, id: firstId } = await jobs.newestCard(
      'pipelines',
      'prepare and train'
    );
    await expect(pipeline).toHaveAttribute('data-status', 'COMPLETED', {
      timeout: 180 * 1000
    });
    await expect(
      pipeline.getByTestId('pipeline-stage').evaluateAll(stages =>
        stages.map(stage => (stage as HTMLElement).dataset.status)
      )
    ).resolves.toEqual(['COMPLETED', 'COMPLETED']);
    // (a finished pipeline offers Delete, not Stop)
    await expect(pipeline.getByTestId('pipeline-action-stop')).toHaveCount(0);
    await expect(pipeline.getByTestId('pipeline-action-delete')).toBeVisible();

    // And the second stage's job read what the first wrote: its log says so
    await pipeline
      .getByTestId('pipeline-job-open')
      .filter({ hasText: 'train.ipynb' })
      .click();
    const detail = panel.getByTestId('job-detail');
    await expect(detail).toHaveAttribute('data-status', 'COMPLETED');
    await expect(detail).toContainText('read hello', { timeout: 30 * 1000 });

    // When she reruns the template from the file browser with another message
    await page.filebrowser.refresh();
    await page
      .locator('.jp-DirListing-item', {
        hasText: 'prepare-and-train.pipeline.yaml'
      })
      .click({ button: 'right' });
    await page
      .locator('.lm-Menu-item', { hasText: 'Run Pipeline Template…' })
      .click();
    const rerun = page.locator('.jp-Dialog', {
      has: page.getByTestId('pipeline-template-form')
    });
    await expect(rerun.getByTestId('template-stages')).toContainText(
      'prepare.ipynb'
    );
    await rerun.getByTestId('wide-parameter-add').click();
    await rerun.getByTestId('wide-parameter-name').last().fill('message');
    await rerun.getByTestId('wide-parameter-value').last().fill('again');
    await rerun.locator(SELECTORS.SUBMIT).click();
    await expect(rerun).toBeHidden({ timeout: 30 * 1000 });

    // Then the rerun completes too, and its second job read the new message
    const again = panel.locator(
      `[data-testid="pipeline"]:not([data-pipeline-id="${firstId}"])`
    );
    await expect(again).toHaveCount(1);
    await expect(again.getByTestId('pipeline-template')).toContainText(
      'prepare-and-train.pipeline.yaml'
    );
    await expect(again).toHaveAttribute('data-status', 'COMPLETED', {
      timeout: 180 * 1000
    });
    await again
      .getByTestId('pipeline-job-open')
      .filter({ hasText: 'train.ipynb' })
      .click();
    await expect(detail).toContainText('read again', { timeout: 30 * 1000 });
  });

  test('a failed job stops the job beside it and skips the stage after, each saying why', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const paths = ['prepare', 'eval-fails', 'eval-slow', 'report'].map(
      name => `${tmpPath}/${name}.ipynb`
    );
    await jobs.createNotebook(paths[0], PREPARE);
    await jobs.createNotebook(paths[1], FAILING);
    await jobs.createNotebook(paths[2], SLOW);
    await jobs.createNotebook(paths[3], REPORT);

    // Given the builder with the slow evaluation moved beside the failing one
    const dialog = await openBuilder(page, paths);
    await dialog
      .locator(`[data-testid="builder-stage-picker"][data-path="${paths[2]}"]`)
      .selectOption('1');
    await expect(dialog.getByTestId('builder-stage')).toHaveCount(3);
    await expect(
      dialog.getByTestId('builder-stage').nth(1).getByTestId('builder-job')
    ).toHaveCount(2);
    await dialog.getByTestId('builder-name').fill('evaluate in parallel');

    // When she runs it
    await dialog.locator(SELECTORS.SUBMIT).click();
    await expect(dialog.getByTestId('builder-error')).toHaveCount(0);
    await expect(dialog).toBeHidden({ timeout: 30 * 1000 });

    // Then the pipeline fails, and says which job failed where
    const panel = page.locator(SELECTORS.JOBS_PANEL);
    const pipeline = panel
      .getByTestId('pipeline')
      .filter({ hasText: 'evaluate in parallel' })
      .first();
    await expect(pipeline).toHaveAttribute('data-status', 'FAILED', {
      timeout: 180 * 1000
    });
    await expect(pipeline.getByTestId('pipeline-status')).toContainText(
      'eval-fails.ipynb'
    );
    const job = (name: string) =>
      pipeline
        .getByTestId('pipeline-job')
        .filter({ has: page.getByText(`${name}.ipynb`, { exact: true }) });
    await expect(job('eval-fails')).toHaveAttribute('data-status', 'FAILED');
    await expect(job('eval-fails').getByTestId('pipeline-job-why')).toContainText(
      'bad split'
    );
    // And the slow job beside it was stopped because of it
    await expect(job('eval-slow')).toHaveAttribute('data-status', 'STOPPED', {
      timeout: 60 * 1000
    });
    await expect(job('eval-slow').getByTestId('pipeline-job-why')).toContainText(
      'eval-fails.ipynb'
    );
    // And the last stage never started: skipped, with no job to open
    await expect(job('report')).toHaveAttribute('data-status', 'SKIPPED');
    await expect(job('report').getByTestId('pipeline-job-open')).toHaveCount(0);
    await expect(
      pipeline.getByTestId('pipeline-stage').nth(2)
    ).toHaveAttribute('data-status', 'SKIPPED');

    await pipeline.scrollIntoViewIfNeeded();
    await jobs.screenshotsLightAndDark('pipeline-failed');
  });

  test('a pipeline repeated on a schedule starts its first run, linked from the Schedules tab', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);

    // Given the builder over two notebooks, repeated every minute, one run at most
    const dialog = await builderOverPrepareAndTrain(jobs, tmpPath);
    await dialog.getByTestId('builder-name').fill('every minute');
    await dialog.getByTestId('schedule-repeat-checkbox').check();
    await repeatEveryMinute(dialog, 1);
    const submit = dialog.locator(SELECTORS.SUBMIT);
    await expect(submit).toHaveText('Create Schedule');

    // When she creates the schedule
    await submit.click();
    await expect(dialog).toBeHidden({ timeout: 30 * 1000 });

    // Then the Schedules tab shows it as a schedule of the pipeline
    const panel = page.locator(SELECTORS.JOBS_PANEL);
    const card = panel.getByTestId('schedule').filter({ hasText: 'every minute' });
    await expect(card.getByTestId('schedule-notebook')).toHaveText(
      'pipeline “every minute” (2 stages)'
    );

    // And its first run links to the pipeline it started, which completes
    const link = card.getByTestId('schedule-run-pipeline');
    await expect(link).toBeVisible({ timeout: 150 * 1000 });
    const pipelineId = (await link.getAttribute('data-pipeline-id')) ?? '';
    await link.click();
    await expect(panel.getByTestId('jobs-tab-pipelines')).toHaveAttribute(
      'aria-selected',
      'true'
    );
    await expect(
      panel.locator(`[data-pipeline-id="${pipelineId}"]`)
    ).toHaveAttribute('data-status', 'COMPLETED', { timeout: 180 * 1000 });
  });
});
