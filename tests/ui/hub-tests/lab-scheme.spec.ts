/**
 * JupyterLab behind the demo hub follows the system's light or dark scheme, as the hub's
 * own pages do, and asks no "Jupyter news?" (the environment's settings overrides,
 * jupyter-config/lab/settings/overrides.d/; tests/unit/test_lab_settings.py checks that
 * they are installed where JupyterLab reads them).
 *
 * Given student6, whose system is in the dark scheme, when they start a server from the
 * spawn page, then their JupyterLab opens in JupyterLab Dark with no news question, and
 * turns light with the system; its settings say never to fetch news. Screenshots
 * lab-scheme-{dark,light}.png.
 */
import * as path from "path";

import {
  serverRequest,
  signInToHome,
  startFromSpawnPage,
} from "../helpers/HubHelper";
import { expect, test } from "../helpers/hubPageErrors";
import { SCREENSHOTS } from "../helpers/RunAsJobHelper";

const USER = "student6";

test.setTimeout(240 * 1000);

test("JupyterLab follows the dark scheme of the system and asks no news question", async ({
  browser,
}) => {
  // Given a person whose system is in the dark scheme
  const { context, page } = await signInToHome(browser, USER, "dark");

  // When they start their server
  await page.goto("/hub/spawn");
  await startFromSpawnPage(page, USER, "cpu");

  // Then their JupyterLab is dark, without their choosing a theme
  const body = page.locator("body");
  await expect(body).toHaveAttribute("data-jp-theme-name", "JupyterLab Dark");
  await expect(body).toHaveAttribute("data-jp-theme-light", "false");
  await expect(page.locator("#jupyterlab-splash")).toHaveCount(0, {
    timeout: 30 * 1000,
  });
  // and it never fetches news, so it never asks about them
  const settings = await serverRequest(
    page,
    USER,
    "GET",
    "lab/api/settings/@jupyterlab/apputils-extension:notification",
  );
  expect(settings.status()).toBe(200);
  const notification = await settings.json();
  expect(notification.schema.properties.fetchNews.default).toBe("false");
  expect(notification.settings.fetchNews ?? "false").toBe("false");
  await page.screenshot({
    path: path.join(SCREENSHOTS, "lab-scheme-dark.png"),
  });

  // When the system turns light, the lab follows
  await page.emulateMedia({ colorScheme: "light" });
  await expect(body).toHaveAttribute("data-jp-theme-name", "JupyterLab Light");
  await expect(page.locator("#jupyterlab-splash")).toHaveCount(0, {
    timeout: 30 * 1000,
  });
  await page.screenshot({
    path: path.join(SCREENSHOTS, "lab-scheme-light.png"),
  });
  // (and none is showing)
  await expect(
    page.locator(".Toastify__toast", { hasText: "Jupyter news" }),
  ).toHaveCount(0);
  await context.close();
});
