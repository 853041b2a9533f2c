import { expect, test } from '../helpers/pageErrors';

import { GREETING_NOTEBOOK, RunAsJobHelper } from '../helpers/RunAsJobHelper';
const OPEN_JOBS_PANEL = 'jupyter-to-job:open-jobs-panel';

test.describe('The Jobs panel', () => {
  test('a user opens it from the command palette and sees a Jobs tab', async ({
    page
  }) => {
    // Given JupyterLab with Run as Job (galata has loaded /lab)
    // When the user runs "Jobs" from the command palette
    await page.keyboard.press('Control+Shift+C');
    const palette = page.locator('#modal-command-palette');
    await palette.locator('input').fill('Jobs');
    await palette
      .locator(`[data-command="${OPEN_JOBS_PANEL}"]`)
      .first()
      .click();

    // Then a Jobs tab is open and current in the main area
    const tab = page.activity.getTabLocator('Jobs');
    await expect(tab).toBeVisible();
    await expect(tab).toHaveClass(/lm-mod-current/);
    await expect(page.locator('#jp-JupyterToJob-jobsPanel')).toBeVisible();
    await new RunAsJobHelper(page).screenshot('jobs-panel.png');
  });

  test('running the command again brings the same tab forward', async ({
    page
  }) => {
    // Given the Jobs panel is open and then hidden behind the Launcher
    await page.evaluate(
      command => window.jupyterapp.commands.execute(command),
      OPEN_JOBS_PANEL
    );
    await page.evaluate(() =>
      window.jupyterapp.commands.execute('launcher:create')
    );
    await expect(page.activity.getTabLocator('Jobs')).not.toHaveClass(
      /lm-mod-current/
    );

    // When the command runs again
    await page.evaluate(
      command => window.jupyterapp.commands.execute(command),
      OPEN_JOBS_PANEL
    );

    // Then there is still one Jobs tab, and it is the current one
    const tabs = page.locator('#jp-main-dock-panel .lm-TabBar-tab', {
      hasText: 'Jobs'
    });
    await expect(tabs).toHaveCount(1);
    await expect(tabs).toHaveClass(/lm-mod-current/);
  });
});

test.describe('When a job ends', () => {
  // Jobs run on the machine of the test server (standalone mode), with real kernels.
  test.setTimeout(120 * 1000);

  test('the student is told by a notification, and "Show job" opens it in the Jobs panel', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const notebookPath = `${tmpPath}/greeting.ipynb`;
    // Given a job of the student's submitted from the notebook's toolbar
    const { detail, jobId } = await jobs.submit(
      await jobs.openDialogOf(notebookPath, GREETING_NOTEBOOK)
    );
    // And the panel's wording while it runs: cells counted from 1, the parameters
    // cell named as such, the flavor by its title
    await expect(detail.getByTestId('job-detail-status')).toHaveText(
      /^(Starting the kernel and setting parameters|Setting parameters|Running cell [1-4] of 4)\.$/,
      { timeout: 30 * 1000 }
    );
    await expect(jobs.row(jobId)).toContainText('This server');
    await expect(jobs.row(jobId)).not.toContainText('local');
    // (her own jobs only: no Owner column)
    await expect(page.getByTestId('jobs-owner-header')).toHaveCount(0);

    // When the student goes back to the notebook and the job completes
    await page.notebook.openByPath(notebookPath);
    const toast = page.locator('.Toastify__toast', {
      hasText: /Job “greeting [^”]+” completed in/
    });
    await expect(toast).toBeVisible({ timeout: 60 * 1000 });
    await expect(page.locator('.Toastify__toast--success')).toHaveCount(1);
    const showJob = toast.getByRole('button', { name: 'Show job' });
    await expect(showJob).toBeVisible();
    // (held open under the pointer, and still once it has slid in)
    await toast.hover();
    await showJob.click({ trial: true });
    await jobs.screenshot('job-end-notification.png');

    // Then "Show job" brings the Jobs panel forward at that job
    await showJob.click();
    await expect(toast).toBeHidden();
    await expect(page.activity.getTabLocator('Jobs')).toHaveClass(
      /lm-mod-current/
    );
    await expect(detail).toHaveAttribute('data-job-id', jobId);
    await expect(detail).toHaveAttribute('data-status', 'COMPLETED');
    // And her own finished job offers her Delete and Rerun
    await expect(detail.getByTestId('job-action-rerun')).toBeVisible();
    await expect(detail.getByTestId('job-action-delete')).toBeVisible();

    // The Jobs panel in light and dark, for the record
    await jobs.screenshotsLightAndDark('jobs-panel');
  });
});
