/**
 * Edit and rerun: Rerun in the Jobs panel opens the Run as Job dialog filled from the
 * job (its notebook as it ran, its flavor and parameters), the researcher changes a
 * parameter, and a second job with a name of its own runs the same notebook with the
 * new value; each job's detail links the other.
 */
import { IJupyterLabPageFixture } from "@jupyterlab/galata";

import { expect, test } from "../helpers/pageErrors";
import {
  COMMANDS,
  expectReadyToSubmit,
  notebook,
  RunAsJobHelper,
  SELECTORS,
} from "../helpers/RunAsJobHelper";

const LOOP_NOTEBOOK = notebook([
  { source: "run = 'run1'\nsteps = 2", tags: ["parameters"] },
  {
    source:
      "for step in range(steps):\n    print(f'{run} step {step}', flush=True)",
  },
  { source: "print('the notebook as it was submitted')" },
]);

// The same file edited after the first job: a rerun must not run this.
const EDITED_NOTEBOOK = notebook([
  { source: "size = 1", tags: ["parameters"] },
  { source: "print('the notebook as edited later')" },
]);

/** Submit the notebook at `path` as the Run as Job dialog does; the job's id. */
async function submitJob(
  page: IJupyterLabPageFixture,
  path: string,
  name: string,
): Promise<string> {
  const response = await page.request.post("/jupyter-to-job/api/jobs", {
    data: { input_path: path, name },
  });
  expect(response.ok()).toBe(true);
  return (await response.json()).job_id;
}

test.use({ viewport: { width: 1280, height: 800 } });

test.describe("Edit and rerun", () => {
  // Jobs run on the machine of the test server (standalone mode), with real kernels.
  test.setTimeout(180 * 1000);

  test("a researcher reruns a job with a new parameter: a second job, named apart, whose log shows the new value", async ({
    page,
    tmpPath,
  }) => {
    const jobs = new RunAsJobHelper(page);
    // Given a job "loop run1" that ran loop.ipynb with run = 'run1'
    const path = `${tmpPath}/loop.ipynb`;
    await jobs.createNotebook(path, LOOP_NOTEBOOK);
    const firstId = await submitJob(page, path, "loop run1");
    // and the notebook edited since
    const edited = await page.request.put(`/api/contents/${path}`, {
      data: { type: "notebook", format: "json", content: EDITED_NOTEBOOK },
    });
    expect(edited.ok()).toBe(true);

    // When she opens it in the Jobs panel and, once it has ended, presses Rerun
    await page.evaluate(
      (command) => window.jupyterapp.commands.execute(command),
      COMMANDS.OPEN_JOBS_PANEL,
    );
    await jobs.row(firstId).click();
    const panel = page.locator(SELECTORS.JOBS_PANEL);
    const detail = panel.getByTestId("job-detail");
    await expect(detail).toHaveAttribute("data-job-id", firstId);
    await expect(detail).toHaveAttribute("data-status", "COMPLETED", {
      timeout: 60 * 1000,
    });
    await detail.getByTestId("job-action-rerun").click();

    // Then the Run as Job dialog opens, filled from the job: the next free name, its
    // parameters as the notebook it ran declared them, with the job's values
    const dialog = page.locator(SELECTORS.DIALOG);
    await expect(dialog).toBeVisible();
    await expectReadyToSubmit(dialog);
    await expect(dialog.locator(".jp-Dialog-header")).toContainText(
      "Run “loop run1” again",
    );
    await expect(dialog.getByTestId("run-as-job-note")).toContainText(
      "as “loop run1” ran it",
    );
    await expect(dialog.getByTestId("job-name-input")).toHaveValue(
      "loop run1 (2)",
    );
    const runBox = dialog.locator(
      '[data-testid="parameter-input"][data-parameter="run"]',
    );
    await expect(runBox).toHaveValue("run1");
    await expect(
      dialog.locator('[data-testid="parameter-input"][data-parameter="size"]'),
    ).toHaveCount(0);

    // When she changes the parameter
    await runBox.fill("run2");
    await jobs.screenshotsLightAndDark("rerun-dialog");
    await page.setViewportSize({ width: 375, height: 812 });
    await jobs.screenshotsLightAndDark("rerun-dialog-375");
    await page.setViewportSize({ width: 1280, height: 800 });
    // and submits
    await dialog.locator(SELECTORS.SUBMIT).click();
    await expect(dialog).toBeHidden({ timeout: 30 * 1000 });

    // Then the panel shows a second, distinct job under its own name
    await expect(detail).not.toHaveAttribute("data-job-id", firstId);
    const secondId = (await detail.getAttribute("data-job-id")) ?? "";
    expect(secondId).not.toBe("");
    await expect(detail.locator(".jp-JupyterToJob-detailTitle")).toHaveText(
      "loop run1 (2)",
    );
    await expect(jobs.row(firstId)).toContainText("loop run1");
    await expect(jobs.row(secondId)).toContainText("loop run1 (2)");
    // whose log shows the new value, from the notebook as the first job ran it
    await expect(detail).toHaveAttribute("data-status", "COMPLETED", {
      timeout: 60 * 1000,
    });
    const log = detail.getByTestId("job-log");
    await expect(log).toContainText("run2 step 1");
    await expect(log).toContainText("the notebook as it was submitted");
    await expect(log).not.toContainText("run1 step");
    await expect(log).not.toContainText("edited later");

    // And the rerun links the job it reruns, which links its rerun back
    const original = detail.getByTestId("job-rerun-of");
    await expect(original).toHaveText("loop run1");
    await jobs.screenshotsLightAndDark("rerun-detail");
    await original.click();
    await expect(detail).toHaveAttribute("data-job-id", firstId);
    await expect(detail.getByTestId("job-rerun")).toHaveText("loop run1 (2)");
    await expect(detail.getByTestId("job-rerun")).toHaveAttribute(
      "data-job-id",
      secondId,
    );
  });
});
