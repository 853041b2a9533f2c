/**
 * A running job's status in step with its log: sampled while a job of a few slow
 * cells runs, the Jobs panel never shows fewer cells done than its log shows, nor an
 * earlier cell running than the log's newest "cell N started (k of n)".
 */
import { IJupyterLabPageFixture } from "@jupyterlab/galata";

import { expect, test } from "../helpers/pageErrors";
import {
  COMMANDS,
  notebook,
  RunAsJobHelper,
  SELECTORS,
} from "../helpers/RunAsJobHelper";

/** A parameters cell, then four cells that each print at once and sleep 1.5 s. */
const SLOW_CELLS_NOTEBOOK = notebook([
  { source: "run = 'run0'", tags: ["parameters"] },
  ...[1, 2, 3, 4].map((step) => ({
    source: `import time\nprint('step ${step} of', run, flush=True)\ntime.sleep(1.5)`,
  })),
]);

interface ISample {
  status: string;
  statusLine: string;
  done: number;
  log: string[];
}

/** The panel's status, cells done and log lines, read at one instant. */
function sample(page: IJupyterLabPageFixture): Promise<ISample> {
  return page.evaluate(() => {
    const detail = document.querySelector<HTMLElement>(
      '[data-testid="job-detail"]',
    )!;
    const progress = detail.querySelector<HTMLElement>(
      '[data-testid="job-progress"]',
    );
    return {
      status: detail.dataset.status ?? "",
      statusLine:
        detail.querySelector('[data-testid="job-detail-status"]')
          ?.textContent ?? "",
      done: Number(progress?.dataset.done ?? 0),
      log: Array.from(
        detail.querySelectorAll('[data-testid="job-log-line"]'),
      ).map((line) => line.lastElementChild?.textContent ?? ""),
    };
  });
}

/** What the log lines of a sample say: the newest cell started, the cells with output. */
function readLog(log: string[]): {
  started: number;
  runningCell: number | null;
  cellsWithOutput: Set<number>;
} {
  let started = 0;
  let runningCell: number | null = null;
  const cellsWithOutput = new Set<number>();
  for (const line of log) {
    const start = /^\[job\] cell (\d+) started \((\d+) of \d+\)$/.exec(line);
    if (start) {
      started = Number(start[2]);
      runningCell = Number(start[1]);
    }
    const output = /^\[cell (\d+)\] /.exec(line);
    if (output) {
      cellsWithOutput.add(Number(output[1]));
    }
  }
  return { started, runningCell, cellsWithOutput };
}

test.describe("A running job in the Jobs panel", () => {
  // The job runs on the machine of the test server (standalone mode), with a real kernel.
  test.setTimeout(120 * 1000);

  test("never shows fewer cells done than its log has cells with output", async ({
    page,
    tmpPath,
  }) => {
    const jobs = new RunAsJobHelper(page);
    // Given a job of four slow cells, followed in the Jobs panel
    const path = `${tmpPath}/slow-cells.ipynb`;
    await jobs.createNotebook(path, SLOW_CELLS_NOTEBOOK);
    const response = await page.request.post("/jupyter-to-job/api/jobs", {
      data: {
        input_path: path,
        name: "slow cells",
        parameters: { run: "run1" },
      },
    });
    expect(response.ok()).toBe(true);
    const jobId = (await response.json()).job_id;
    await page.evaluate(
      ([command, id]) =>
        window.jupyterapp.commands.execute(command, { jobId: id }),
      [COMMANDS.OPEN_JOBS_PANEL, jobId],
    );
    const detail = page.locator(SELECTORS.JOBS_PANEL).getByTestId("job-detail");
    await expect(detail).toHaveAttribute("data-job-id", jobId);

    // When the panel is sampled while the job runs, to its end
    const samples: ISample[] = [];
    for (;;) {
      const now = await sample(page);
      samples.push(now);
      if (["COMPLETED", "FAILED", "STOPPED"].includes(now.status)) {
        break;
      }
      await page.waitForTimeout(100);
    }

    // Then it completed, and was seen running with output in its log
    expect(samples[samples.length - 1].status).toBe("COMPLETED");
    const running = samples.filter(
      (one) =>
        one.status === "RUNNING" && readLog(one.log).cellsWithOutput.size,
    );
    expect(running.length).toBeGreaterThan(3);
    // And at no sample did the panel lag its log
    for (const one of samples) {
      const log = readLog(one.log);
      const finished = [...log.cellsWithOutput].filter(
        (cell) => one.status !== "RUNNING" || cell !== log.runningCell,
      );
      expect(one.done, JSON.stringify(one)).toBeGreaterThanOrEqual(
        finished.length,
      );
      expect(one.done, JSON.stringify(one)).toBeGreaterThanOrEqual(
        Math.max(0, log.started - 1),
      );
      if (one.status === "RUNNING" && log.started > 0) {
        // (five: the parameters cell is one of the user's cells too)
        const shown = /^Running cell (\d+) of 5\.$/.exec(one.statusLine);
        expect(shown, JSON.stringify(one)).not.toBeNull();
        expect(Number(shown![1])).toBeGreaterThanOrEqual(log.started);
      }
    }
  });
});
