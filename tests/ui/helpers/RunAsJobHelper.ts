/**
 * Page object of Run as Job for the browser tests: where its parts are, and the
 * notebooks the tests run as jobs.
 */
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';
import { Locator } from '@playwright/test';
import * as path from 'path';

/**
 * Where screenshots go: UI_ARTIFACTS_DIR, as for the rest of the run's artifacts
 * (playwright.config.js), else test-artifacts/ui/ at the repository root.
 */
export const SCREENSHOTS =
  process.env.UI_ARTIFACTS_DIR ||
  path.resolve(__dirname, '..', '..', '..', 'test-artifacts', 'ui');

/**
 * Selectors of Run as Job's parts; commands are found by their `data-command`.
 */
export enum SELECTORS {
  RUN_AS_JOB_BUTTON = '.jp-NotebookPanel-toolbar [data-command="jupyter-to-job:run-as-job"]',
  DIALOG = '.jp-Dialog.jp-JupyterToJob-dialog',
  SUBMIT = '.jp-JupyterToJob-submit',
  CANCEL = '.jp-Dialog-button.jp-mod-reject',
  JOBS_PANEL = '#jp-JupyterToJob-jobsPanel',
  SESSION_STATUS = '.jp-JupyterToJob-sessionStatus'
}

/**
 * Command ids, as `data-command` shows them.
 */
export enum COMMANDS {
  RUN_AS_JOB = 'jupyter-to-job:run-as-job',
  OPEN_JOBS_PANEL = 'jupyter-to-job:open-jobs-panel'
}

interface ICell {
  source: string;
  tags?: string[];
}

/**
 * A Python notebook (nbformat 4) with the given code cells.
 */
export function notebook(cells: ICell[]): Record<string, unknown> {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3 (ipykernel)',
        language: 'python'
      },
      language_info: { name: 'python' }
    },
    cells: cells.map((cell, index) => ({
      cell_type: 'code',
      id: `cell-${index}`,
      metadata: cell.tags ? { tags: cell.tags } : {},
      source: cell.source,
      outputs: [],
      execution_count: null
    }))
  };
}

/**
 * A short job: a parameters cell, then cells that print and sleep (about 5 s).
 */
export const GREETING_NOTEBOOK = notebook([
  {
    source: "greeting = 'hello'\nrepeat = 3\nnap = 1.0",
    tags: ['parameters']
  },
  { source: 'import time' },
  {
    source:
      "for i in range(repeat):\n    print(f'{greeting} {i}', flush=True)\n    time.sleep(nap)"
  },
  { source: "print('all done after', repeat * nap, 's')" }
]);

/**
 * A long job: prints a tick every second for ten minutes.
 */
export const TICKING_NOTEBOOK = notebook([
  { source: 'import time' },
  {
    source:
      "for i in range(600):\n    print(f'tick {i}', flush=True)\n    time.sleep(1)"
  }
]);

/**
 * Wait until the Run as Job dialog can be submitted: its flavors listed, one of them
 * selected, and Submit enabled, which the dialog does only once the notebook's
 * parameters are read too.
 */
export async function expectReadyToSubmit(dialog: Locator): Promise<void> {
  await expect(dialog.getByTestId('flavor-picker')).toHaveAttribute(
    'data-state',
    'loaded'
  );
  await expect(
    dialog.getByTestId('flavor-option').getByRole('radio', { checked: true })
  ).toHaveCount(1);
  await expect(dialog.locator(SELECTORS.SUBMIT)).toBeEnabled();
}

/**
 * Fill "Repeat on a schedule" (already ticked) as every minute, `maxRuns` runs at most.
 */
export async function repeatEveryMinute(
  dialog: Locator,
  maxRuns: number
): Promise<void> {
  await dialog.getByTestId('schedule-interval-count').fill('1');
  await dialog.getByTestId('schedule-interval-unit').selectOption('minutes');
  await dialog.getByTestId('schedule-max-runs').fill(String(maxRuns));
}

/**
 * Run as Job in one galata page.
 */
export class RunAsJobHelper {
  constructor(readonly page: IJupyterLabPageFixture) {}

  /**
   * Write `content` as a notebook at `path` through the contents API.
   */
  async createNotebook(
    path: string,
    content: Record<string, unknown>
  ): Promise<void> {
    expect(
      await this.page.contents.uploadContent(
        JSON.stringify(content),
        'text',
        path
      )
    ).toBe(true);
  }

  /**
   * Open the notebook at `path` and click Run as Job on its toolbar.
   */
  async openAndClickRunAsJob(path: string): Promise<Locator> {
    expect(await this.page.notebook.openByPath(path)).toBe(true);
    const button = this.page.locator(SELECTORS.RUN_AS_JOB_BUTTON).first();
    await expect(button).toBeVisible();
    await button.click();
    return button;
  }

  /**
   * The Run as Job dialog, once it can be submitted (see `expectReadyToSubmit`).
   */
  async dialog(): Promise<Locator> {
    const dialog = this.page.locator(SELECTORS.DIALOG);
    await expect(dialog).toBeVisible();
    await expectReadyToSubmit(dialog);
    return dialog;
  }

  /**
   * Write `content` as a notebook at `path`, open it, click Run as Job and return
   * the dialog once it can be submitted.
   */
  async openDialogOf(
    path: string,
    content: Record<string, unknown>
  ): Promise<Locator> {
    await this.createNotebook(path, content);
    await this.openAndClickRunAsJob(path);
    return this.dialog();
  }

  /**
   * Submit the dialog once it can be, and wait for the Jobs panel to show the new job.
   *
   * @returns The job's detail and its id.
   */
  async submit(dialog: Locator): Promise<{ detail: Locator; jobId: string }> {
    await expectReadyToSubmit(dialog);
    await dialog.locator(SELECTORS.SUBMIT).click();
    await expect(dialog).toBeHidden({ timeout: 30 * 1000 });
    const panel = this.page.locator(SELECTORS.JOBS_PANEL);
    await expect(panel).toBeVisible();
    const detail = panel.getByTestId('job-detail');
    await expect(detail).toBeVisible();
    const jobId = (await detail.getAttribute('data-job-id')) ?? '';
    expect(jobId).not.toBe('');
    return { detail, jobId };
  }

  /**
   * The saved content of the file at `path`, as the server has it.
   */
  async savedText(path: string): Promise<string> {
    const response = await this.page.request.get(
      `/api/contents/${path.split('/').map(encodeURIComponent).join('/')}?content=1`
    );
    expect(response.ok()).toBe(true);
    return JSON.stringify((await response.json()).content);
  }

  /**
   * The row of the job in the Jobs panel's table.
   */
  row(jobId: string): Locator {
    return this.page
      .locator(SELECTORS.JOBS_PANEL)
      .locator(`[data-testid="job-row"][data-job-id="${jobId}"]`);
  }

  /**
   * The Jobs panel's tab `tab` ("schedules", "pipelines"...) is the one shown; its
   * newest card (of those with `hasText`), found again by its id: other tests' cards
   * may be listed on the shared test server.
   */
  async newestCard(
    tab: 'schedules' | 'pipelines',
    hasText?: string
  ): Promise<{ card: Locator; id: string }> {
    const kind = tab === 'schedules' ? 'schedule' : 'pipeline';
    const panel = this.page.locator(SELECTORS.JOBS_PANEL);
    await expect(panel.getByTestId(`jobs-tab-${tab}`)).toHaveAttribute(
      'aria-selected',
      'true'
    );
    const id =
      (await panel
        .getByTestId(kind)
        .filter(hasText ? { hasText } : {})
        .first()
        .getAttribute(`data-${kind}-id`)) ?? '';
    return { card: panel.locator(`[data-${kind}-id="${id}"]`), id };
  }

  /**
   * Save a screenshot under SCREENSHOTS.
   */
  async screenshot(name: string): Promise<void> {
    await this.page.screenshot({ path: path.join(SCREENSHOTS, name) });
  }

  /**
   * Save `<name>-light.png` and `<name>-dark.png`, and go back to the light theme.
   */
  async screenshotsLightAndDark(name: string): Promise<void> {
    await this.page.theme.setLightTheme();
    await this.screenshot(`${name}-light.png`);
    await this.page.theme.setDarkTheme();
    await this.screenshot(`${name}-dark.png`);
    await this.page.theme.setLightTheme();
  }
}
