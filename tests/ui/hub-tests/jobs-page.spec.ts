/**
 * The hub's jobs page (the job service's own page, /services/jupyter-to-job/): with
 * their server stopped, a person still finds their jobs from the hub's Services menu,
 * reads a finished job's log and opens its executed notebook. Light and dark, at
 * 1280x800 and 375x812; no uncaught error on any page.
 */
import { Page } from "@playwright/test";
import { expect, test } from "../helpers/hubPageErrors";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";

import { signInToHome, startFromSpawnPage } from "../helpers/HubHelper";
import { notebook, SCREENSHOTS } from "../helpers/RunAsJobHelper";

const USER = "student7";
const NOTEBOOK = "page-report.ipynb";
const JOBS_PAGE = "/services/jupyter-to-job/";

test.setTimeout(240 * 1000);

/**
 * The notebook's last cell waits for this file and takes it away: a job cannot finish
 * before the test lets it, so what its page shows meanwhile came from following the log.
 * (The demo hub runs jobs on this machine, as the same account.)
 */
const GATE = path.join(
  os.tmpdir(),
  `jobs-page-gate-${process.pid}-${Date.now()}`,
);

/**
 * A request to the user's server with its own xsrf cookie (the hub's, at /hub/, is
 * another one).
 */
async function serverRequest(
  page: Page,
  user: string,
  method: "GET" | "POST" | "PUT",
  address: string,
  data?: Record<string, unknown>,
) {
  const cookies = await page.context().cookies();
  const xsrf =
    cookies.find(
      (cookie) =>
        cookie.name === "_xsrf" && cookie.path.startsWith(`/user/${user}`),
    )?.value ?? "";
  return page.request.fetch(`/user/${user}/${address}`, {
    method,
    headers: { "X-XSRFToken": xsrf },
    data,
  });
}

test("with the server stopped, the jobs page shows a finished job’s log and its executed notebook", async ({
  browser,
}) => {
  // Given a person who ran a job from their server
  const { page } = await signInToHome(browser, USER);
  await page.goto("/hub/spawn");
  await startFromSpawnPage(page, USER, "cpu");
  const saved = await serverRequest(
    page,
    USER,
    "PUT",
    `api/contents/${NOTEBOOK}`,
    {
      type: "notebook",
      format: "json",
      content: notebook([
        { source: "subject = 'page'", tags: ["parameters"] },
        { source: "print(f'report on {subject} written', flush=True)" },
        {
          source: [
            "import os, time",
            `gate = ${JSON.stringify(GATE)}`,
            "while not os.path.exists(gate):",
            "    time.sleep(0.2)",
            "os.remove(gate)",
            "print('report filed', flush=True)",
          ].join("\n"),
        },
      ]),
    },
  );
  expect(saved.status(), await saved.text()).toBeLessThan(300);
  const created = await serverRequest(
    page,
    USER,
    "POST",
    "jupyter-to-job/api/jobs",
    {
      input_path: NOTEBOOK,
      name: "weekly report",
      flavor: "cpu-job",
    },
  );
  expect(created.status(), await created.text()).toBe(201);
  const jobId: string = (await created.json()).job_id;
  fs.writeFileSync(GATE, "go"); // this first run goes straight through
  await expect
    .poll(
      async () =>
        (
          await (
            await serverRequest(
              page,
              USER,
              "GET",
              `jupyter-to-job/api/jobs/${jobId}`,
            )
          ).json()
        ).status,
      { timeout: 90 * 1000 },
    )
    .toBe("COMPLETED");
  // and who then stopped their server
  await page.goto("/hub/home");
  await page.locator("#stop").click();
  await expect(page.locator("#start")).toBeVisible({ timeout: 60 * 1000 });
  await expect(page.locator("#stop")).toBeHidden();

  // When they pick the jobs page in the hub's Services menu
  await page.getByRole("button", { name: "Services" }).click();
  await page.locator(`a.dropdown-item[href="${JOBS_PAGE}"]`).click();

  // Then, signed in through the hub, the page lists the job, finished
  await expect(page).toHaveURL(new RegExp(`${JOBS_PAGE}$`));
  const row = page.locator(`[data-testid="job-row"][data-job-id="${jobId}"]`);
  await expect(row).toContainText("weekly report");
  await expect(row.getByTestId("status-badge")).toHaveAttribute(
    "data-status",
    "COMPLETED",
  );
  await expect(row).toContainText("CPU job"); // the flavor's title
  await screenshots(page, "hub-jobs-page-list");

  // When they open it
  await row.getByRole("link", { name: "weekly report" }).click();

  // Then its complete log shows what the notebook printed
  await expect(page.getByTestId("job-name")).toHaveText("weekly report");
  await expect(page.getByTestId("job-log")).toContainText(
    "report on page written",
  );
  await expect(page.getByTestId("job-log-state")).toHaveText("complete");
  // with Rerun (theirs, finished) and no Stop
  await expect(page.getByTestId("job-rerun")).toBeVisible();
  await expect(page.getByTestId("job-stop")).toHaveCount(0);
  await screenshots(page, "hub-jobs-page-job");

  // And TensorBoard over the job's folder opens in their own server, which the hub,
  // as it is stopped, offers to start first (the job service runs no TensorBoard)
  const tensorboard = page.getByTestId("job-tensorboard");
  const folder = NOTEBOOK.includes("/")
    ? NOTEBOOK.slice(0, NOTEBOOK.lastIndexOf("/"))
    : ".";
  await expect(tensorboard).toHaveAttribute(
    "href",
    `/hub/user/${USER}/jupyter-to-job/tensorboard/open?folder=${encodeURIComponent(folder)}`,
  );
  const notRunning = await page.context().newPage();
  await notRunning.goto((await tensorboard.getAttribute("href")) ?? "");
  await expect(notRunning.locator("h1")).toHaveText("Server not running");
  await expect(notRunning.locator("#start")).toBeVisible();
  await notRunning.close();

  // And its executed notebook opens, as HTML, with the output in it
  const html = page.getByTestId("job-output-html");
  const opened = await page.request.get(
    (await html.getAttribute("href")) ?? "",
  );
  expect(opened.status()).toBe(200);
  expect(await opened.text()).toContain("report on page written");
  const ipynb = await page.request.get(
    (await page.getByTestId("job-output-ipynb").getAttribute("href")) ?? "",
  );
  expect(ipynb.status()).toBe(200);
  expect(JSON.stringify(await ipynb.json())).toContain(
    "report on page written",
  );

  // And Rerun runs it again, with no server, as a new job that links back to it
  await page.getByTestId("job-rerun").click();
  await expect(page.getByTestId("job-rerun-done")).toBeVisible();
  await expect(page.getByTestId("job-name")).toHaveText("weekly report (2)");
  await expect(page.getByTestId("job-rerun-of")).toHaveText("weekly report");
  // and, while it runs, its log appears on the page as it is written
  await expect(page.getByTestId("job-log-state")).toHaveText("following…");
  await expect(page.getByTestId("job-log")).toContainText(
    "report on page written",
    { timeout: 90 * 1000 },
  );
  await expect(page.getByTestId("job-log")).not.toContainText("report filed");
  await expect(page.getByTestId("job-log-state")).toHaveText("following…");
  await expect(page.getByTestId("job-progress")).toContainText("of 3 cells");
  // until it ends: the page then shows the whole log and the finished job's outputs
  fs.writeFileSync(GATE, "go");
  await expect(page.getByTestId("job-log")).toContainText("report filed", {
    timeout: 90 * 1000,
  });
  await expect(page.getByTestId("job-log-state")).toHaveText("complete");
  await expect(page.getByTestId("job-output-html")).toBeVisible();
});

/** Light and dark, at 1280x800 and at 375x812 (a phone), with no sideways scroll. */
async function screenshots(page: Page, name: string): Promise<void> {
  for (const [size, viewport] of [
    ["", { width: 1280, height: 800 }],
    ["-375", { width: 375, height: 812 }],
  ] as const) {
    await page.setViewportSize(viewport);
    for (const scheme of ["dark", "light"] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await page.reload();
      await expect(page.locator("html")).toHaveAttribute(
        "data-bs-theme",
        scheme,
      );
      const sideways = await page.evaluate(
        () =>
          document.documentElement.scrollWidth -
          document.documentElement.clientWidth,
      );
      expect(
        sideways,
        `${name}${size}-${scheme} scrolls sideways`,
      ).toBeLessThanOrEqual(0);
      await page.screenshot({
        path: path.join(SCREENSHOTS, `${name}${size}-${scheme}.png`),
        fullPage: true,
      });
    }
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}
