/**
 * The Run as Job dialog uses the window's height: in a 1280x850 window its form shows
 * whole, or scrolls only past the window, where JupyterLab keeps every dialog within
 * 500px (the form scrolled inside about 375px of an 850px window).
 */
import { expect, test } from "../helpers/pageErrors";
import * as path from "path";

import {
  GREETING_NOTEBOOK,
  RunAsJobHelper,
  SCREENSHOTS,
} from "../helpers/RunAsJobHelper";

test.use({ viewport: { width: 1280, height: 850 } });

test("in an 850px window the Run as Job dialog takes the window’s height", async ({
  page,
  tmpPath,
}) => {
  // Given a notebook, in a window 850px tall
  const helper = new RunAsJobHelper(page);

  // When its Run as Job dialog opens, with the whole form
  const dialog = await helper.openDialogOf(
    `${tmpPath}/dialog-height.ipynb`,
    GREETING_NOTEBOOK,
  );
  // and the schedule's fields too, as someone repeating it sees them
  await dialog.getByLabel("Repeat on a schedule").check();
  const content = dialog.locator(".jp-Dialog-content");
  const body = dialog.locator(".jp-Dialog-body");
  const size = async () =>
    body.evaluate((node) => ({
      form: node.scrollHeight, // the whole form
      shown: node.clientHeight, // what is shown of it
      box: (
        node.closest(".jp-Dialog-content") as HTMLElement
      ).getBoundingClientRect().height,
      window: window.innerHeight,
    }));
  const { form, shown, box, window } = await size();

  // Then (the form being longer than JupyterLab's 500px dialog) the dialog is taller
  // than 500px, and shows the form whole or as much of it as the window holds
  expect(form, "the form is long enough to tell").toBeGreaterThan(500);
  expect(box).toBeGreaterThan(500);
  expect(box).toBeLessThanOrEqual(window - 32);
  expect(
    shown === form || box >= window - 32 - 1,
    JSON.stringify(await size()),
  ).toBe(true);
  await expect(content).toBeInViewport({ ratio: 1 });
  await page.screenshot({
    path: path.join(SCREENSHOTS, "run-as-job-dialog-1280x850.png"),
  });
  await page.theme.setDarkTheme();
  await page.screenshot({
    path: path.join(SCREENSHOTS, "run-as-job-dialog-1280x850-dark.png"),
  });
});
