/**
 * The Jobs panel reached as people look for it: the Jobs tab of the left sidebar
 * (kept open across a reload, as the rest of the layout is), the View menu and the
 * launcher's Jobs card.
 */
import { IJupyterLabPageFixture } from "@jupyterlab/galata";
import { Locator } from "@playwright/test";

import { expect, test } from "../helpers/pageErrors";
import {
  GREETING_NOTEBOOK,
  RunAsJobHelper,
  SELECTORS,
} from "../helpers/RunAsJobHelper";

const SIDEBAR_ID = "jp-JupyterToJob-jobsSidebar";

test.use({ viewport: { width: 1280, height: 800 } });

/**
 * Submit the notebook at `path` as a job through the server's job API, as the Run as
 * Job dialog does, and return its id.
 */
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

/** The left sidebar's Jobs tab (the icon in the side bar). */
function sidebarTab(page: IJupyterLabPageFixture): Locator {
  return page.locator(`.jp-SideBar.jp-mod-left [data-id="${SIDEBAR_ID}"]`);
}

test.describe("The Jobs tab of the left sidebar", () => {
  // A job runs on the machine of the test server (standalone mode), with a real kernel.
  test.setTimeout(120 * 1000);

  test("a researcher opens her jobs from the sidebar, then one of them in the Jobs panel", async ({
    page,
    tmpPath,
  }) => {
    const jobs = new RunAsJobHelper(page);
    // Given a job of hers that ran to its end
    const notebookPath = `${tmpPath}/greeting.ipynb`;
    await jobs.createNotebook(notebookPath, GREETING_NOTEBOOK);
    const jobId = await submitJob(page, notebookPath, "greeting sidebar");

    // When she clicks the Jobs icon in the left sidebar
    await expect(sidebarTab(page)).toHaveAttribute("title", "Jobs");
    await sidebarTab(page).click();

    // Then the sidebar lists the job, and follows it to its end
    const sidebar = page.locator(`#${SIDEBAR_ID}`);
    await expect(sidebar).toBeVisible();
    const item = sidebar.locator(
      `[data-testid="jobs-sidebar-item"][data-job-id="${jobId}"]`,
    );
    await expect(item).toContainText("greeting sidebar");
    await expect(item).toHaveAttribute("data-status", "COMPLETED", {
      timeout: 60 * 1000,
    });
    await expect(item).toContainText("4 of 4 cells");

    // When she clicks the job
    await item.click();

    // Then the Jobs panel opens in the main area at that job
    const panel = page.locator(SELECTORS.JOBS_PANEL);
    await expect(panel).toBeVisible();
    await expect(page.activity.getTabLocator("Jobs")).toHaveClass(
      /lm-mod-current/,
    );
    const detail = panel.getByTestId("job-detail");
    await expect(detail).toHaveAttribute("data-job-id", jobId);
    await expect(detail).toHaveAttribute("data-status", "COMPLETED");
    await jobs.screenshotsLightAndDark("jobs-sidebar");

    // And on a phone-sized screen (375x812) the sidebar still lists the job, whole
    await page.setViewportSize({ width: 375, height: 812 });
    if (!(await sidebar.isVisible())) {
      await sidebarTab(page).click();
    }
    await expect(item).toBeVisible();
    await expect(item).toContainText("greeting sidebar");
    const box = await item.boundingBox();
    expect(box).not.toBeNull();
    expect(box!.x).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width).toBeLessThanOrEqual(375);
    await jobs.screenshotsLightAndDark("jobs-sidebar-375");
    // and with the sidebar folded away, the Jobs panel it opened has the width
    await sidebarTab(page).click();
    await expect(sidebar).toBeHidden();
    await expect(detail).toBeVisible();
    await expect(detail).toHaveAttribute("data-job-id", jobId);
    await jobs.screenshotsLightAndDark("jobs-panel-375");
    await page.setViewportSize({ width: 1280, height: 800 });
    if (!(await sidebar.isVisible())) {
      await sidebarTab(page).click();
    }

    // And after a reload (no Launcher to wait for: the layout is the panel) the
    // sidebar's Jobs tab is still the open one
    await page.reload({ waitForIsReady: false });
    await expect(page.locator(`#${SIDEBAR_ID}`)).toBeVisible();
    await expect(sidebarTab(page)).toHaveClass(/lm-mod-current/);
    await expect(
      page.locator(`#${SIDEBAR_ID} [data-job-id="${jobId}"]`),
    ).toBeVisible();
  });

  test("the sidebar’s toolbar opens the Jobs panel as it is", async ({
    page,
  }) => {
    // Given the Jobs tab of the sidebar open
    await sidebarTab(page).click();
    const open = page
      .locator(`#${SIDEBAR_ID}`)
      .getByTestId("jobs-sidebar-open-panel");

    // When she clicks "Open Jobs panel"
    await open.click();

    // Then the Jobs panel is the current tab of the main area
    await expect(page.locator(SELECTORS.JOBS_PANEL)).toBeVisible();
    await expect(page.activity.getTabLocator("Jobs")).toHaveClass(
      /lm-mod-current/,
    );
  });
});

test.describe("The Jobs panel in the menus and the launcher", () => {
  test("View › Jobs opens the Jobs panel", async ({ page }) => {
    // When the user picks Jobs in the View menu
    await page.menu.clickMenuItem("View>Jobs");

    // Then the Jobs panel is open and current
    await expect(page.locator(SELECTORS.JOBS_PANEL)).toBeVisible();
    await expect(page.activity.getTabLocator("Jobs")).toHaveClass(
      /lm-mod-current/,
    );
  });

  test("the launcher’s Jobs card opens the Jobs panel", async ({ page }) => {
    // Given a new launcher
    await page.evaluate(() =>
      window.jupyterapp.commands.execute("launcher:create"),
    );
    const card = page
      .locator(".jp-Launcher")
      .getByRole("button", { name: "Jobs", exact: true });
    await expect(card).toHaveCount(1);

    // When the user clicks the Jobs card
    await card.click();

    // Then the Jobs panel is open and current
    await expect(page.locator(SELECTORS.JOBS_PANEL)).toBeVisible();
    await expect(page.activity.getTabLocator("Jobs")).toHaveClass(
      /lm-mod-current/,
    );
  });
});
