import { expect, test } from '../helpers/pageErrors';
import * as path from 'path';

import {
  COMMANDS,
  expectReadyToSubmit,
  GREETING_NOTEBOOK,
  RunAsJobHelper,
  SCREENSHOTS,
  SELECTORS,
  TICKING_NOTEBOOK
} from '../helpers/RunAsJobHelper';

// Jobs run on the machine of the test server (standalone mode), with real kernels.
test.setTimeout(120 * 1000);

test.describe('Run as Job from the notebook toolbar', () => {
  test('a student runs a notebook as a job and follows it to COMPLETED', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const notebookPath = `${tmpPath}/greeting.ipynb`;

    // Given a saved notebook with a parameters cell and cells that print and sleep
    await jobs.createNotebook(notebookPath, GREETING_NOTEBOOK);

    // When the student clicks Run as Job on its toolbar
    await jobs.openAndClickRunAsJob(notebookPath);

    // Then the dialog offers the available flavor in words, with its queue
    const dialog = await jobs.dialog();
    const flavor = dialog.getByTestId('flavor-option').first();
    await expect(flavor).toContainText('No GPU');
    await expect(flavor).toContainText(/\d+ running, \d+ queued/);
    await expect(dialog.getByTestId('job-name-input')).toHaveValue(
      /^greeting \d{4}-\d{2}-\d{2} \d{2}:\d{2}$/
    );
    // And the notebook's parameters, prefilled and editable
    const repeat = dialog.locator(
      '[data-testid="parameter-input"][data-parameter="repeat"]'
    );
    await expect(repeat).toHaveValue('3');
    await expect(
      dialog.locator(
        '[data-testid="parameter-input"][data-parameter="greeting"]'
      )
    ).toHaveValue('hello');
    await expect(dialog.getByTestId('deadline-input')).toHaveValue('60');

    // When they pick the flavor, ask for 5 greetings, and submit
    await flavor.click();
    await repeat.fill('5');
    await jobs.screenshot('run-as-job-dialog.png');
    await page.theme.setDarkTheme();
    await jobs.screenshot('run-as-job-dialog-dark.png');
    await page.theme.setLightTheme();
    const { detail, jobId } = await jobs.submit(dialog);

    // Then the Jobs panel shows the job running, with its progress
    await expect(detail).toHaveAttribute('data-status', 'RUNNING', {
      timeout: 30 * 1000
    });
    const row = jobs.row(jobId);
    await expect(row.getByTestId('job-status-badge')).toHaveText('Running');
    // (the notebook's four code cells: papermill's parameters cell is not counted)
    await expect(row.getByTestId('job-progress')).toContainText(/of 4 cells/, {
      timeout: 20 * 1000
    });
    await jobs.screenshot('run-as-job-running.png');

    // And then COMPLETED, every cell done
    await expect(detail).toHaveAttribute('data-status', 'COMPLETED', {
      timeout: 60 * 1000
    });
    await expect(row.getByTestId('job-progress')).toContainText('4 of 4 cells');
    await expect(row).toHaveAttribute('data-status', 'COMPLETED');

    // And the log shows the cells' output, with their [cell N] prefixes
    const log = detail.getByTestId('job-log');
    await expect(log).toContainText(/\[cell \d+\] hello 4/);
    await expect(log).toContainText(/\[cell \d+\] all done after 5\.0 s/);
    await expect(detail.getByTestId('job-log-state')).toHaveText('complete');
    await jobs.screenshot('run-as-job-completed.png');

    // When they open the executed notebook
    await detail.getByTestId('job-action-open-notebook').click();

    // Then it is saved into their files and opens, with the job's outputs
    const tab = page.activity.getTabLocator(/^greeting-.*\.ipynb$/);
    await expect(tab).toBeVisible({ timeout: 20 * 1000 });
    await expect(
      page.locator(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output',
        {
          hasText: 'hello 4'
        }
      )
    ).toBeVisible();
    expect(await page.contents.directoryExists('job-outputs')).toBe(true);

    // When they go back to the panel and download the HTML copy
    await page.activity.activateTab('Jobs');
    const download = page.waitForEvent('download');
    await detail.getByTestId('job-action-download-html').click();

    // Then the browser saves the job's HTML output
    expect((await download).suggestedFilename()).toMatch(
      /^greeting-[0-9a-f]{8}\.html$/
    );

    // When they rerun it as it was (Rerun opens the dialog filled from the job)
    await detail.getByTestId('job-action-rerun').click();
    const again = await jobs.dialog();
    await again.locator(SELECTORS.SUBMIT).click();
    await expect(again).toBeHidden({ timeout: 30 * 1000 });

    // Then a new job with the same parameters is selected, beside the first one
    await expect(detail).not.toHaveAttribute('data-job-id', jobId);
    await expect(detail).toContainText('repeat = 5');
    const rerunId = (await detail.getAttribute('data-job-id')) ?? '';
    await expect(jobs.row(rerunId)).toBeVisible();
    await expect(jobs.row(jobId)).toHaveAttribute('data-status', 'COMPLETED');
  });

  test('a long job is stopped from the Jobs panel and shows STOPPED', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const notebookPath = `${tmpPath}/ticking.ipynb`;

    // Given a job that prints a tick every second for ten minutes, running
    const dialog = await jobs.openDialogOf(notebookPath, TICKING_NOTEBOOK);
    const { detail, jobId } = await jobs.submit(dialog);
    await expect(detail).toHaveAttribute('data-status', 'RUNNING', {
      timeout: 30 * 1000
    });
    // And its log follows the ticks as they come
    await expect(detail.getByTestId('job-log')).toContainText('tick 2', {
      timeout: 30 * 1000
    });
    await expect(detail.getByTestId('job-log-state')).toHaveText('following…');

    // When the student clicks Stop and confirms
    await detail.getByTestId('job-action-stop').click();
    await page.getByRole('button', { name: 'Stop job' }).click();

    // Then the job ends as STOPPED, and the log stays readable
    await expect(detail).toHaveAttribute('data-status', 'STOPPED', {
      timeout: 60 * 1000
    });
    await expect(jobs.row(jobId)).toHaveAttribute('data-status', 'STOPPED');
    await expect(detail.getByTestId('job-log')).toContainText('tick 1');
    await expect(detail.getByTestId('job-action-stop')).toHaveCount(0);
    await expect(detail.getByTestId('job-action-delete')).toBeVisible();
    await jobs.screenshot('run-as-job-stopped.png');

    // When they delete it
    await detail.getByTestId('job-action-delete').click();
    await page.getByRole('button', { name: 'Delete job' }).click();

    // Then it leaves the list
    await expect(jobs.row(jobId)).toHaveCount(0);
  });

  test('unsaved changes are saved first, through "Save and Continue"', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const notebookPath = `${tmpPath}/edited.ipynb`;
    await jobs.createNotebook(notebookPath, GREETING_NOTEBOOK);
    expect(await page.notebook.openByPath(notebookPath)).toBe(true);

    // Given the notebook has an unsaved edit
    await page.notebook.setCell(3, 'code', "print('edited before the job')");

    // When the student clicks Run as Job
    await page.locator(SELECTORS.RUN_AS_JOB_BUTTON).first().click();

    // Then they are asked to save first, and the dialog opens after saving
    const ask = page.locator('.jp-Dialog', {
      hasText: 'Save the notebook first?'
    });
    await expect(ask).toBeVisible();
    await ask.getByRole('button', { name: 'Save and Continue' }).click();
    const dialog = await jobs.dialog();
    expect(await jobs.savedText(notebookPath)).toContain(
      'edited before the job'
    );

    // And Cancel closes it without a job
    await dialog.locator(SELECTORS.CANCEL).click();
    await expect(dialog).toBeHidden();
    await expect(page.locator(SELECTORS.JOBS_PANEL)).toHaveCount(0);
  });

  test('a deadline out of range is said next to its box, in view, and nothing is sent until it is fixed', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const dialog = await jobs.openDialogOf(
      `${tmpPath}/deadline.ipynb`,
      GREETING_NOTEBOOK
    );
    const deadline = dialog.getByTestId('deadline-input');

    // When the student asks for a deadline far past the flavor's limit and submits
    await deadline.fill('100000');
    await dialog.locator(SELECTORS.SUBMIT).click();

    // Then the dialog stays, the box is marked, and its message is next to it, in view
    const message = dialog.getByTestId('deadline-error');
    await expect(message).toBeVisible();
    await expect(message).toBeInViewport();
    await expect(message).toContainText('Give the deadline in whole minutes');
    await expect(deadline).toHaveAttribute('aria-invalid', 'true');
    await expect(deadline).toBeFocused();
    await expect(page.locator(SELECTORS.JOBS_PANEL)).toHaveCount(0);
    await jobs.screenshot('run-as-job-deadline-error.png');

    // When it is fixed, the job is submitted
    await deadline.fill('5');
    await expect(message).toHaveCount(0);
    const { detail } = await jobs.submit(dialog);
    await expect(detail).toBeVisible();
  });

  test('the file browser offers Run as Job for a notebook', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    await jobs.createNotebook(`${tmpPath}/browsed.ipynb`, GREETING_NOTEBOOK);
    await page.filebrowser.refresh();

    // When the student right-clicks the notebook in the file browser
    await page
      .locator('.jp-DirListing-item[data-file-type="notebook"]', {
        hasText: 'browsed.ipynb'
      })
      .click({ button: 'right' });

    // Then "Run as Job" opens the dialog for that notebook
    await page.getByRole('menuitem', { name: 'Run as Job' }).click();
    const dialog = await jobs.dialog();
    await expect(dialog).toContainText('browsed');
    await dialog.locator(SELECTORS.CANCEL).click();
    await expect(dialog).toBeHidden();
  });
});

test.describe('While the Run as Job dialog loads', () => {
  test('Submit waits for the notebook’s parameters, not only for the flavors', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const notebookPath = `${tmpPath}/slow-parameters.ipynb`;
    await jobs.createNotebook(notebookPath, GREETING_NOTEBOOK);
    // Given a server that lists the flavors at once but is slow to read the notebook's
    // parameters: their answer is held until the test lets it through
    let letParametersThrough = () => {};
    const parametersLetThrough = new Promise<void>(resolve => {
      letParametersThrough = resolve;
    });
    await page.route(/\/jupyter-to-job\/api\/parameters/, async route => {
      await parametersLetThrough;
      await route.continue();
    });

    // When the student clicks Run as Job
    await jobs.openAndClickRunAsJob(notebookPath);

    // Then the flavors are offered and one is selected, but Submit waits for the parameters
    const dialog = page.locator(SELECTORS.DIALOG);
    await expect(
      dialog.getByTestId('flavor-option').getByRole('radio', { checked: true })
    ).toHaveCount(1);
    await expect(dialog.getByTestId('parameters')).toContainText(
      'Reading the notebook’s parameters…'
    );
    await expect(dialog.locator(SELECTORS.SUBMIT)).toBeDisabled();

    // When the parameters arrive
    letParametersThrough();

    // Then they show, and Submit is enabled
    await expect(
      dialog.locator('[data-testid="parameter-input"][data-parameter="repeat"]')
    ).toHaveValue('3');
    await expect(dialog.locator(SELECTORS.SUBMIT)).toBeEnabled();
    await dialog.locator(SELECTORS.CANCEL).click();
    await expect(dialog).toBeHidden();
  });

  test('flavors that cannot be listed are explained, and Retry lists them', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const notebookPath = `${tmpPath}/no-flavors-yet.ipynb`;
    await jobs.createNotebook(notebookPath, GREETING_NOTEBOOK);
    // Given a server whose flavor list fails until the catalog is fixed
    const sentence =
      'The job flavors cannot be loaded right now (the course catalog has errors).';
    let catalogFixed = false;
    await page.route(/\/jupyter-to-job\/api\/flavors/, route =>
      catalogFixed
        ? route.continue()
        : route.fulfill({
            status: 500,
            contentType: 'application/json',
            body: JSON.stringify({ message: sentence, reason: 'no-catalog' })
          })
    );

    // When the student clicks Run as Job
    await jobs.openAndClickRunAsJob(notebookPath);

    // Then the Flavor group says why there is nothing to pick, and Submit is disabled
    const dialog = page.locator(SELECTORS.DIALOG);
    await expect(dialog.getByTestId('flavors-error')).toContainText(sentence);
    await expect(dialog.getByTestId('flavor-option')).toHaveCount(0);
    await expect(dialog.locator(SELECTORS.SUBMIT)).toBeDisabled();
    await jobs.screenshot('run-as-job-flavors-error.png');

    // When the catalog is fixed and they press Retry
    catalogFixed = true;
    await dialog.getByTestId('flavors-retry').click();

    // Then the flavors are offered, one selected, and the dialog can be submitted
    await expectReadyToSubmit(dialog);
    await expect(dialog.getByTestId('flavors-error')).toHaveCount(0);
    await dialog.locator(SELECTORS.CANCEL).click();
    await expect(dialog).toBeHidden();
  });
});

test.describe('The Jobs panel', () => {
  test('is restored after a reload', async ({ page }) => {
    // Given the Jobs panel is open, and the layout saved with it
    const layoutSaved = page.waitForRequest(
      request =>
        request.method() === 'PUT' &&
        request.url().includes('/api/workspaces') &&
        (request.postData() ?? '').includes('jupyter-to-job:jobs')
    );
    await page.evaluate(
      command => window.jupyterapp.commands.execute(command),
      COMMANDS.OPEN_JOBS_PANEL
    );
    await expect(page.locator(SELECTORS.JOBS_PANEL)).toBeVisible();
    await layoutSaved;

    // When the page is reloaded (with no Launcher to wait for: the layout is the panel)
    await page.reload({ waitForIsReady: false });

    // Then the panel is back
    await expect(page.locator(SELECTORS.JOBS_PANEL)).toBeVisible({
      timeout: 30 * 1000
    });
    await expect(page.activity.getTabLocator('Jobs')).toBeVisible();
    await expect(page.locator('.jp-Launcher')).toHaveCount(0);
  });

  test('filters the jobs by name', async ({ page }) => {
    await page.evaluate(
      command => window.jupyterapp.commands.execute(command),
      COMMANDS.OPEN_JOBS_PANEL
    );
    const panel = page.locator(SELECTORS.JOBS_PANEL);
    await expect(panel.getByTestId('jobs-loading')).toHaveCount(0);
    await expect(panel.getByTestId('jobs-message')).toHaveCount(0);

    await panel.getByTestId('jobs-filter-name').fill('no job is called this');

    await expect(panel.getByTestId('job-row')).toHaveCount(0);
    await expect(panel.getByTestId('jobs-empty')).toBeVisible();
    await expect(panel.getByTestId('jobs-count')).toContainText(
      /^0 of \d+ jobs$/
    );
  });
});

test.describe('The status bar during a course session', () => {
  test('shows the GPU share and warns in the last minutes of the class', async ({
    page
  }) => {
    // The test server runs as a course server would: its spawner environment says
    // a quarter of an RTX 4090, with the class ending a few minutes from now.
    const item = page.locator(SELECTORS.SESSION_STATUS);
    await expect(item).toBeVisible();
    await expect(item).toHaveText(
      /^GPU: 1\/4 of an RTX 4090, 6 GiB · class ends in \d+ min$/
    );
    await expect(item).toHaveClass(/jp-JupyterToJob-statusWarning/);
    await page.locator('#jp-main-statusbar').screenshot({
      path: path.join(SCREENSHOTS, 'status-bar-session.png')
    });
  });
});

test.describe('When Run as Job cannot be used', () => {
  test('the dialog does not open when the server has no Run as Job extension', async ({
    page,
    tmpPath
  }) => {
    const jobs = new RunAsJobHelper(page);
    const notebookPath = `${tmpPath}/lonely.ipynb`;
    await jobs.createNotebook(notebookPath, GREETING_NOTEBOOK);
    // Given a server that answers api/config as Jupyter does without the extension
    await page.route(/\/jupyter-to-job\/api\/config/, route =>
      route.fulfill({
        status: 404,
        contentType: 'text/html',
        body: '<html><body>404 : Not Found</body></html>'
      })
    );

    // When the student clicks Run as Job
    await jobs.openAndClickRunAsJob(notebookPath);

    // Then no dialog opens, and a notification says why
    await expect
      .poll(async () => (await page.notifications).map(n => n.message))
      .toContainEqual(
        expect.stringMatching(/^Run as Job is not available on this server/)
      );
    await expect(page.locator(SELECTORS.DIALOG)).toHaveCount(0);
  });

  test('the Jobs panel shows the sentence when the hub service is down', async ({
    page
  }) => {
    // Given a server whose job API answers 503, as when the hub's job service is down
    const sentence =
      'The job service of the hub cannot be reached right now. Try again in a minute.';
    await page.route(/\/jupyter-to-job\/api\/jobs/, route =>
      route.fulfill({
        status: 503,
        contentType: 'application/json',
        body: JSON.stringify({ message: sentence, reason: 'unavailable' })
      })
    );

    // When the student opens the Jobs panel
    await page.evaluate(
      command => window.jupyterapp.commands.execute(command),
      COMMANDS.OPEN_JOBS_PANEL
    );

    // Then it shows the server's sentence instead of an empty list
    const panel = page.locator(SELECTORS.JOBS_PANEL);
    await expect(panel.getByTestId('jobs-message')).toHaveText(sentence);
    await expect(panel.getByTestId('jobs-table')).toHaveCount(0);
    await expect(panel.getByTestId('jobs-empty')).toHaveCount(0);
    await new RunAsJobHelper(page).screenshot('jobs-panel-service-down.png');
  });
});
