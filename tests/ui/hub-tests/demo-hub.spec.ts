/**
 * Through the demo hub (hub_config/local/), as a student would: log in, start the GPU demo
 * course's server, and run a notebook as a job on a quarter GPU.
 *
 * Plain Playwright: JupyterLab lives behind the hub, where galata's fixtures (made for a
 * standalone server) do not reach. The hub is the `hub` webServer of playwright.config.js.
 */
import { Page } from "@playwright/test";
import * as path from "path";

import {
  expectReadyToSubmit,
  notebook,
  SCREENSHOTS,
  SELECTORS,
} from "../helpers/RunAsJobHelper";
import { expect, test } from "../helpers/hubPageErrors";

const USER = "student1";
const NOTEBOOK = "hub-greeting.ipynb";
const LINE = "hello from the demo hub";

test.setTimeout(120 * 1000);

/**
 * Write `content` as a notebook of the user's server through its contents API, with the
 * server's xsrf cookie the browser holds.
 */
async function saveNotebook(
  page: Page,
  name: string,
  content: Record<string, unknown>,
): Promise<void> {
  const cookies = await page.context().cookies();
  const xsrf = cookies.find((cookie) => cookie.name === "_xsrf")?.value ?? "";
  const response = await page.request.put(
    `/user/${USER}/api/contents/${name}`,
    {
      headers: { "X-XSRFToken": xsrf },
      data: { type: "notebook", format: "json", content },
    },
  );
  expect(response.status(), await response.text()).toBeLessThan(300);
}

test("a student starts the GPU demo course and runs a notebook as a job on a quarter GPU", async ({
  page,
}) => {
  // Given the student logs in (the demo hub takes any password)
  await page.goto("/hub/login");
  await page.locator("input[name=username]").fill(USER);
  await page.locator("input[name=password]").fill("any password");
  await page.locator("#login_submit").click();

  // Then the spawn page offers the GPU demo course, open now
  await expect(page).toHaveURL(/\/hub\/spawn/);
  const card = page.locator('.gpus-card[data-profile="gpu-demo"]');
  await expect(card).toContainText("GPU demo course");
  await expect(card).toHaveAttribute("data-available", "true");
  // with the GPU-hours left of the course's weekly budget (none used yet)
  // (renewed next Monday 00:00 of the course's zone, UTC, told in the browser's, here UTC)
  const budget = card.locator(".gpus-budget");
  await expect(budget).toHaveText(
    /^6\.0 of your 6 GPU-hours left this week \(renews (tomorrow |Mon |Mon \d+ \w+ )?00:00 UTC\)$/,
  );
  const renews = new Date(
    (await budget.locator("time").getAttribute("datetime"))!,
  );
  expect(renews.getUTCDay()).toBe(1);
  expect(renews.toISOString().slice(11, 16)).toBe("00:00");
  await page.screenshot({
    path: path.join(SCREENSHOTS, "hub-spawn-page.png"),
    fullPage: true,
  });

  // When they choose it and start
  await page.locator("input[name=profile][value=gpu-demo]").check();
  await page.getByRole("button", { name: "Start" }).click();

  // Then their JupyterLab loads behind the hub
  await expect(page).toHaveURL(new RegExp(`/user/${USER}/lab`), {
    timeout: 60 * 1000,
  });
  await expect(page.locator("#jp-main-dock-panel")).toBeVisible({
    timeout: 60 * 1000,
  });
  // And the status bar shows the course's GPU share
  const status = page.getByTestId("session-status");
  await expect(status).toBeVisible({ timeout: 20 * 1000 });
  await expect(status).toContainText(/GPU: 1\/4 of an RTX 4090/);

  // Given a saved notebook that prints a known line
  await saveNotebook(
    page,
    NOTEBOOK,
    notebook([
      { source: "import os" },
      { source: `print('${LINE}', flush=True)` },
    ]),
  );

  // When they open it and click Run as Job on its toolbar
  await page.goto(`/user/${USER}/lab/tree/${NOTEBOOK}`);
  const button = page.locator(SELECTORS.RUN_AS_JOB_BUTTON).first();
  await expect(button).toBeVisible({ timeout: 60 * 1000 });
  await button.click();

  // Then the dialog offers the quarter GPU of the course; they pick it and submit
  const dialog = page.locator(SELECTORS.DIALOG);
  await expect(dialog).toBeVisible();
  const flavor = dialog.locator(
    '[data-testid="flavor-option"][data-flavor-id="quarter-gpu"]',
  );
  await expect(flavor).toBeVisible({ timeout: 20 * 1000 });
  // and what is left of the course's weekly budget, now that the server counts,
  // its renewal told in the browser's zone as the spawn page tells it (here UTC too),
  // the course's own words in its title
  const dialogBudget = flavor.getByTestId("flavor-budget");
  await expect(dialogBudget).toHaveText(
    /of your 6 GPU-hours left this week \(renews (tomorrow |Mon |Mon \d+ \w+ )?00:00 UTC\)$/,
  );
  await expect(dialogBudget).toHaveAttribute(
    "title",
    /of your 6 GPU-hours left this week \(renews Monday 00:00, UTC\), the course's time$/,
  );
  await flavor.click();
  await expect(flavor.getByRole("radio")).toBeChecked();
  await expectReadyToSubmit(dialog);
  await dialog.locator(SELECTORS.SUBMIT).click();
  await expect(dialog).toBeHidden({ timeout: 30 * 1000 });

  // Then the Jobs panel follows the job, run by the hub's job service, to COMPLETED
  const panel = page.locator(SELECTORS.JOBS_PANEL);
  const detail = panel.getByTestId("job-detail");
  await expect(detail).toBeVisible();
  await expect(detail).toHaveAttribute("data-status", "COMPLETED", {
    timeout: 60 * 1000,
  });
  // And its log has the notebook's line
  await expect(detail.getByTestId("job-log")).toContainText(LINE);
  await page.screenshot({
    path: path.join(SCREENSHOTS, "hub-job-completed.png"),
  });
});
