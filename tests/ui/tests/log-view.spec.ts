/**
 * The Jobs panel's log view on logs that are long or fast: a finished job that
 * printed 200,000 lines, and a running one printing 5,000 lines a second.
 *
 * The page must stay responsive: the browser reports every task that held its main
 * thread for 50 ms or more ("long tasks", PerformanceObserver), and none may take
 * over 200 ms while the log opens, scrolls, searches, jumps and follows. That is a
 * count of long tasks in the browser's own trace, not a limit on the test's time.
 */
import { IJupyterLabPageFixture } from '@jupyterlab/galata';
import { expect, test } from '../helpers/pageErrors';
import { Locator } from '@playwright/test';
import * as path from 'path';

import { COMMANDS, notebook, SCREENSHOTS } from '../helpers/RunAsJobHelper';

const LONG_TASK_LIMIT_MS = 200;
const LINES = 200000;
const ERROR_AT = 150000;

/**
 * Prints 200,000 numbered rows; after row 150,000 a caught exception's traceback
 * (the job still completes).
 */
const LONG_LOG_NOTEBOOK = notebook([
  {
    source: [
      'import sys, traceback',
      `for i in range(${LINES}):`,
      "    print(f'row {i:06d} of the log')",
      `    if i == ${ERROR_AT}:`,
      '        sys.stdout.flush()',
      '        try:',
      '            1 / 0',
      '        except ZeroDivisionError:',
      '            traceback.print_exc()',
      '        sys.stderr.flush()'
    ].join('\n')
  }
]);

/**
 * Prints 5,000 numbered lines a second, for at most two minutes.
 */
const FAST_LOG_NOTEBOOK = notebook([
  { source: 'import time' },
  {
    source: [
      'start, n = time.time(), 0',
      'while n < 5000 * 120:',
      '    due = int((time.time() - start) * 5000)',
      '    while n < due:',
      "        print(f'live {n:07d} of a fast job')",
      '        n += 1',
      '    time.sleep(0.01)'
    ].join('\n')
  }
]);

interface IJobState {
  status: string;
  log_size: number;
}

/**
 * Run the notebook at `notebookPath` as a job through the server extension's API.
 */
async function createJob(
  page: IJupyterLabPageFixture,
  notebookPath: string,
  content: Record<string, unknown>
): Promise<string> {
  expect(
    await page.contents.uploadContent(
      JSON.stringify(content),
      'text',
      notebookPath
    )
  ).toBe(true);
  const response = await page.request.post('/jupyter-to-job/api/jobs', {
    data: { input_path: notebookPath }
  });
  expect(response.ok()).toBe(true);
  const body = await response.json();
  const jobId: string = body.job_id ?? body.job?.job_id;
  expect(jobId).toBeTruthy();
  return jobId;
}

async function jobState(
  page: IJupyterLabPageFixture,
  jobId: string
): Promise<IJobState> {
  const response = await page.request.get(`/jupyter-to-job/api/jobs/${jobId}`);
  expect(response.ok()).toBe(true);
  return response.json();
}

/**
 * Start recording the page's long tasks (from now on).
 */
async function recordLongTasks(page: IJupyterLabPageFixture): Promise<void> {
  await page.evaluate(() => {
    const tasks: number[] = [];
    (window as any).logViewLongTasks = tasks;
    new PerformanceObserver(list => {
      for (const entry of list.getEntries()) {
        tasks.push(Math.round(entry.duration));
      }
    }).observe({ type: 'longtask' });
  });
}

/**
 * The long tasks recorded so far, in ms; noted in the report of the test.
 */
async function longTasks(page: IJupyterLabPageFixture): Promise<number[]> {
  const tasks: number[] = await page.evaluate(
    () => (window as any).logViewLongTasks
  );
  test.info().annotations.push({
    type: 'long tasks (ms)',
    description: tasks.length ? tasks.join(', ') : 'none'
  });
  return tasks;
}

/**
 * The lines of the log view inside its visible area: number and text.
 */
async function linesInView(
  log: Locator
): Promise<{ line: number; text: string }[]> {
  return log.evaluate(node => {
    const box = node.getBoundingClientRect();
    return Array.from(node.querySelectorAll('[data-testid="job-log-line"]'))
      .filter(line => {
        const rect = line.getBoundingClientRect();
        return rect.top >= box.top - 1 && rect.bottom <= box.bottom + 1;
      })
      .map(line => ({
        line: Number((line as HTMLElement).dataset.line),
        text:
          line.querySelector('.jp-JupyterToJob-logLineText')?.textContent ?? ''
      }));
  });
}

/**
 * The number in the last "live NNNNNNN" line the view shows.
 */
async function lastLiveNumber(log: Locator): Promise<number> {
  const shown = await linesInView(log);
  const numbers = shown
    .map(({ text }) => /live (\d+)/.exec(text))
    .filter((match): match is RegExpExecArray => match !== null)
    .map(match => Number(match[1]));
  return numbers.length ? Math.max(...numbers) : -1;
}

/**
 * Screenshots of the log view in the light and the dark theme.
 */
async function recordLogView(
  page: IJupyterLabPageFixture,
  view: Locator,
  name: string
): Promise<void> {
  await page.theme.setLightTheme();
  await view.screenshot({ path: path.join(SCREENSHOTS, `${name}-light.png`) });
  await page.theme.setDarkTheme();
  await view.screenshot({ path: path.join(SCREENSHOTS, `${name}-dark.png`) });
  await page.theme.setLightTheme();
}

/**
 * Open a Launcher in front of the Jobs panel, hiding it.
 */
async function putLauncherInFront(
  page: IJupyterLabPageFixture,
  log: Locator
): Promise<void> {
  await page.evaluate(async () => {
    await window.jupyterapp.commands.execute('launcher:create');
  });
  await expect(log).toBeHidden();
}

async function openJobInPanel(
  page: IJupyterLabPageFixture,
  jobId: string
): Promise<Locator> {
  await page.evaluate(
    ({ command, jobId }) =>
      window.jupyterapp.commands.execute(command, { jobId }),
    { command: COMMANDS.OPEN_JOBS_PANEL, jobId }
  );
  const detail = page.getByTestId('job-detail');
  await expect(detail).toHaveAttribute('data-job-id', jobId);
  return detail;
}

test.describe('The log view of a long job', () => {
  // Real jobs on the test server's machine: printing 200,000 lines takes a while.
  test.setTimeout(300 * 1000);

  test('opens a finished 200,000-line log at its end, scrolls, searches and jumps to the first error without freezing the page', async ({
    page,
    tmpPath
  }) => {
    // Given a finished job whose log has 200,000 rows and a traceback after row 150,000
    const jobId = await createJob(
      page,
      `${tmpPath}/long-log.ipynb`,
      LONG_LOG_NOTEBOOK
    );
    await expect
      .poll(async () => (await jobState(page, jobId)).status, {
        timeout: 240 * 1000,
        intervals: [1000]
      })
      .toBe('COMPLETED');
    expect((await jobState(page, jobId)).log_size).toBeGreaterThan(LINES * 20);
    await recordLongTasks(page);

    // When the student opens it in the Jobs panel
    const opened = Date.now();
    const detail = await openJobInPanel(page, jobId);
    const view = detail.getByTestId('job-log-view');
    const log = detail.getByTestId('job-log');

    // Then the log is complete, all of it read, and it shows its end
    await expect(detail.getByTestId('job-log-state')).toHaveText('complete');
    test.info().annotations.push({
      type: 'end shown after (ms)',
      description: String(Date.now() - opened)
    });
    await expect(view).toHaveAttribute('data-reading-earlier', 'false', {
      timeout: 60 * 1000
    });
    test.info().annotations.push({
      type: 'whole log read after (ms)',
      description: String(Date.now() - opened)
    });
    await expect(view).toHaveAttribute('data-has-earlier', 'false');
    const lineCount = Number(await view.getAttribute('data-lines'));
    expect(lineCount).toBeGreaterThan(LINES);
    await expect(detail.getByTestId('job-log-lines')).toHaveText(
      `${lineCount.toLocaleString('en-US')} lines`
    );
    await expect(log.locator(`[data-line="${lineCount}"]`)).toBeInViewport();
    await expect(
      log.getByText(`row ${LINES - 1} of the log`, { exact: false })
    ).toBeInViewport();
    // (only the lines in view, and a few around them, are in the page)
    expect(await log.getByTestId('job-log-line').count()).toBeLessThan(200);

    // When they go to the top with the keyboard
    await log.focus();
    await page.keyboard.press('Home');

    // Then the first line shows, and the view no longer follows the end
    await expect(log.locator('[data-line="1"]')).toBeInViewport();
    await expect(view).toHaveAttribute('data-following', 'false');

    // When they scroll down with the mouse wheel, then jump to the end
    await log.hover();
    await page.mouse.wheel(0, 5000);
    await expect(log.locator('[data-line="1"]')).toHaveCount(0);
    await detail.getByTestId('job-log-jump-end').click();

    // Then the last line is in view again
    await expect(log.locator(`[data-line="${lineCount}"]`)).toBeInViewport();
    await expect(view).toHaveAttribute('data-following', 'true');

    // When they search for one row
    const search = detail.getByTestId('job-log-search');
    const count = detail.getByTestId('job-log-search-count');
    await search.fill('row 123456');
    await expect(count).toHaveText('1 line');
    await search.press('Enter');

    // Then it is shown, marked as the current match
    await expect(count).toHaveText('1 of 1 lines');
    const current = log.locator('.jp-JupyterToJob-logLine.jp-mod-current');
    await expect(current).toContainText('row 123456 of the log');
    await expect(current).toBeInViewport();
    await expect(current.locator('mark')).toHaveText('row 123456');

    // When they search for text on 100 rows and step through the matches
    await search.fill('row 1000');
    await expect(count).toHaveText('100 lines');
    await detail.getByTestId('job-log-search-next').click();
    await expect(count).toHaveText(/^\d+ of 100 lines$/);
    const first = Number(/^(\d+)/.exec((await count.textContent()) ?? '')![1]);
    await detail.getByTestId('job-log-search-next').click();
    await expect(count).toHaveText(`${(first % 100) + 1} of 100 lines`);
    await expect(current).toContainText(/row 1000\d\d of the log/);
    await expect(current).toBeInViewport();
    await search.press('Shift+Enter');
    await expect(count).toHaveText(`${first} of 100 lines`);

    // When they jump to the first error
    await detail.getByTestId('job-log-first-error').click();

    // Then the traceback's first line is shown and marked, after row 150,000
    await expect(current).toContainText('Traceback (most recent call last)');
    await expect(current).toHaveClass(/jp-mod-error/);
    await expect(current).toBeInViewport();
    await expect(detail.getByTestId('job-log-notice')).toHaveText(
      /^First error: line [\d,]+\.$/
    );
    // And it is still there after another tab was in front of the Jobs panel
    await putLauncherInFront(page, log);
    await page.activity.activateTab('Jobs');
    await expect(current).toBeInViewport();
    await expect(current).toContainText('Traceback (most recent call last)');
    const errorLine = Number(await current.getAttribute('data-line'));
    const around = (await linesInView(log)).map(({ text }) => text).join('\n');
    expect(around).toContain(`row ${ERROR_AT} of the log`);
    expect(errorLine).toBeGreaterThan(ERROR_AT);

    // And the page stayed responsive throughout: no task over 200 ms
    const tasks = await longTasks(page);
    expect(tasks.filter(ms => ms > LONG_TASK_LIMIT_MS)).toEqual([]);

    // The log view in light and dark, for the record (the job's notification
    // hidden: it floats over the panel's corner)
    await page.addStyleTag({ content: '.Toastify { display: none; }' });
    await recordLogView(page, view, 'log-view-error');
    await search.fill('row 1500');
    await search.press('Enter');
    await expect(count).toHaveText(/^\d+ of 100 lines$/);
    await recordLogView(page, view, 'log-view-search');
  });

  test('follows a job printing 5,000 lines a second, and stops following while the student reads back', async ({
    page,
    tmpPath
  }) => {
    // Given a running job printing 5,000 lines a second
    const jobId = await createJob(
      page,
      `${tmpPath}/fast-log.ipynb`,
      FAST_LOG_NOTEBOOK
    );
    await expect
      .poll(async () => (await jobState(page, jobId)).log_size, {
        timeout: 60 * 1000
      })
      .toBeGreaterThan(100 * 1000);
    await recordLongTasks(page);

    // When the student opens it in the Jobs panel
    const detail = await openJobInPanel(page, jobId);
    const view = detail.getByTestId('job-log-view');
    const log = detail.getByTestId('job-log');
    await expect(detail.getByTestId('job-log-state')).toHaveText('following…');

    // Then the last line shown moves on, and catches up with what the job wrote
    for (let sample = 0; sample < 3; sample++) {
      const before = await lastLiveNumber(log);
      await expect.poll(() => lastLiveNumber(log)).toBeGreaterThan(before);
    }
    const tail = await page.request.get(
      `/jupyter-to-job/api/jobs/${jobId}/logs?tail=1`
    );
    const written = Number(/live (\d+)/.exec((await tail.json()).data)![1]);
    await expect
      .poll(() => lastLiveNumber(log), { timeout: 30 * 1000 })
      .toBeGreaterThanOrEqual(written);
    await expect(view).toHaveAttribute('data-following', 'true');

    // And it still follows after another tab was in front of the Jobs panel
    await putLauncherInFront(page, log);
    await page.activity.activateTab('Jobs');
    await expect(view).toHaveAttribute('data-following', 'true');
    const back = await lastLiveNumber(log);
    expect(back).toBeGreaterThanOrEqual(written);
    await expect.poll(() => lastLiveNumber(log)).toBeGreaterThan(back);

    // When they scroll up to read
    await log.hover();
    await page.mouse.wheel(0, -2000);
    await expect(view).toHaveAttribute('data-following', 'false');
    await expect(detail.getByTestId('job-log-notice')).toHaveText(
      'Paused: scrolled up. Jump to end to follow again.'
    );
    // (the rows of the new scroll position are drawn on the next frame: wait for them)
    await expect
      .poll(async () => (await linesInView(log)).length)
      .toBeGreaterThan(0);
    const reading = (await linesInView(log))[0];

    // Then the lines they read stay put while the log grows under them
    const held = Number(await view.getAttribute('data-lines'));
    await expect
      .poll(async () => Number(await view.getAttribute('data-lines')))
      .toBeGreaterThan(held + 5000);
    expect((await linesInView(log))[0]).toEqual(reading);

    // When they jump to the end
    await detail.getByTestId('job-log-jump-end').click();

    // Then the view follows the newest lines again
    await expect(view).toHaveAttribute('data-following', 'true');
    const resumed = await lastLiveNumber(log);
    await expect.poll(() => lastLiveNumber(log)).toBeGreaterThan(resumed);

    // And the page stayed responsive throughout: no task over 200 ms
    const tasks = await longTasks(page);
    expect(tasks.filter(ms => ms > LONG_TASK_LIMIT_MS)).toEqual([]);
    await page.addStyleTag({ content: '.Toastify { display: none; }' });
    await view.screenshot({
      path: path.join(SCREENSHOTS, 'log-view-following-light.png')
    });

    // The job is stopped, so that it does not run on after the test
    const stop = await page.request.patch(`/jupyter-to-job/api/jobs/${jobId}`, {
      data: { status: 'STOPPED' }
    });
    expect(stop.ok()).toBe(true);
  });
});
