/**
 * Schedules in JupyterLab: a student repeats a notebook on a schedule from the Run as
 * Job dialog, sees it in the Jobs panel's Schedules tab with its first run, pauses,
 * resumes and deletes it. The server is JupyterLab with the standalone job back end,
 * whose embedded scheduler runs the slots on the real clock.
 */
import { expect, test } from '../helpers/pageErrors';

import {
  GREETING_NOTEBOOK,
  repeatEveryMinute,
  RunAsJobHelper,
  SELECTORS
} from '../helpers/RunAsJobHelper';

test.describe('Repeat on a schedule', () => {
  // The first run starts a minute after the schedule is made, then runs a real kernel.
  test.setTimeout(240 * 1000);

  test('a student schedules a notebook every minute, sees its first run, pauses, resumes and deletes it', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const notebookPath = `${tmpPath}/greeting.ipynb`;

    // Given the Run as Job dialog of her notebook, with "Repeat on a schedule" ticked
    const dialog = await jobs.openDialogOf(notebookPath, GREETING_NOTEBOOK);
    await dialog.getByTestId('schedule-repeat-checkbox').check();
    const submit = dialog.locator(SELECTORS.SUBMIT);
    await expect(submit).toHaveText('Create Schedule');

    // When she asks for every minute in a time zone that does not exist
    await repeatEveryMinute(dialog, 3);
    await dialog.getByTestId('schedule-timezone').fill('Mars/Olympus');
    await submit.click();

    // Then the server's sentence stands next to the time zone, and the dialog stays
    const zoneError = dialog.getByTestId('schedule-error-timezone');
    await expect(zoneError).toContainText("'Mars/Olympus' is not a time zone");
    await expect(dialog.getByTestId('schedule-timezone')).toHaveAttribute(
      'aria-invalid',
      'true'
    );
    await jobs.screenshot('schedule-dialog-error.png');

    // When she corrects it and submits again
    await dialog.getByTestId('schedule-timezone').fill('UTC');
    await expect(zoneError).toBeHidden();
    await submit.click();

    // Then the Jobs panel shows the Schedules tab with the schedule in words
    await expect(dialog).toBeHidden({ timeout: 30 * 1000 });
    const panel = page.locator(SELECTORS.JOBS_PANEL);
    const { card } = await jobs.newestCard('schedules');
    await expect(card).toHaveAttribute('data-status', 'ACTIVE');
    await expect(card.getByTestId('schedule-rule')).toHaveText(
      'Every minute (UTC)'
    );
    await expect(card.getByTestId('schedule-notebook')).toHaveText(
      notebookPath
    );
    await expect(card.getByTestId('schedule-stops')).toHaveText(
      'At most 3 runs'
    );
    // a clock time with the browser's zone ("10:15 UTC")
    await expect(card.getByTestId('schedule-next-run')).toHaveText(
      /^\d\d:\d\d [A-Z][\w+-]*$/
    );

    // And its first run appears, a minute later, with a link to its job
    const runLink = card.getByTestId('schedule-run-job').first();
    await expect(runLink).toBeVisible({ timeout: 150 * 1000 });
    await expect(card.getByTestId('schedule-runs')).toHaveText(/^[1-3] of 3$/);

    // The Schedules tab in light and dark, for the record
    await jobs.screenshotsLightAndDark('schedules');

    // When she pauses it, only Resume is offered; when she resumes it, only Pause
    await card.getByTestId('schedule-action-pause').click();
    await expect(card).toHaveAttribute('data-status', 'PAUSED');
    await expect(card.getByTestId('schedule-action-pause')).toHaveCount(0);
    await expect(card.getByTestId('schedule-status')).toContainText('Paused');
    await card.getByTestId('schedule-action-resume').click();
    await expect(card).toHaveAttribute('data-status', 'ACTIVE');
    await expect(card.getByTestId('schedule-action-resume')).toHaveCount(0);

    // When she follows the run's link, its job shows in the Jobs tab
    const jobId = await runLink.getAttribute('data-job-id');
    await runLink.click();
    await expect(panel.getByTestId('jobs-tab-jobs')).toHaveAttribute(
      'aria-selected',
      'true'
    );
    await expect(panel.getByTestId('job-detail')).toHaveAttribute(
      'data-job-id',
      jobId ?? ''
    );

    // When she deletes the schedule, she is asked first, and then it is gone
    await panel.getByTestId('jobs-tab-schedules').click();
    await card.getByTestId('schedule-action-delete').click();
    const confirm = page.locator('.jp-Dialog', {
      hasText: 'Delete the schedule'
    });
    await expect(confirm).toBeVisible();
    await confirm.getByRole('button', { name: 'Delete schedule' }).click();
    await expect(card).toHaveCount(0);
  });
});
