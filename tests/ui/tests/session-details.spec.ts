/**
 * The GPU item of the status bar opens the server's session details: the profile, the
 * share and when the server stops, with the Jobs panel a click away.
 */
import { expect, test } from "../helpers/pageErrors";
import { RunAsJobHelper, SELECTORS } from "../helpers/RunAsJobHelper";

test.use({ viewport: { width: 1280, height: 800 } });

test("a student clicks the GPU item of the status bar and reads her session's details", async ({
  page,
}) => {
  // Given her server's GPU share in the status bar
  const item = page.getByTestId("session-status");
  await expect(item).toContainText("GPU: 1/4 of an RTX 4090");

  // When she clicks it
  await item.click();

  // Then the details say her profile, her share and when her server stops
  const details = page.locator(".jp-JupyterToJob-sessionDetails");
  await expect(details).toBeVisible();
  await expect(details).toContainText("GPU: 1/4 of an RTX 4090, 6 GiB");
  await expect(details).toContainText("Your server stops at");
  await new RunAsJobHelper(page).screenshotsLightAndDark("session-details");

  // and the Jobs panel is a click away
  await details.getByRole("button", { name: "Open Jobs panel" }).click();
  await expect(details).toHaveCount(0);
  await expect(page.locator(SELECTORS.JOBS_PANEL)).toBeVisible();
});
