/**
 * The spawn page through the demo hub, in Chromium, on a laptop and on a phone.
 *
 * Given student4 (enrolled in the GPU demo course, whose class is open, and in ML101),
 * signed in with no server running, in the light and the dark scheme, at 1280x800 and at
 * 375x812:
 * - the page never scrolls sideways (the document is no wider than the window);
 * - every card fits in the window;
 * - each GPU's bar of the "GPUs right now" map stays a readable bar (at least half the
 *   window wide on a phone), with its name and its use beside it;
 * - no script on the page throws.
 *
 * Screenshots go to test-artifacts/ui/spawn-page-{1280x800,375x812}-{light,dark}.png.
 */
import * as fs from 'fs';
import * as path from 'path';

import { signInToHome } from '../helpers/HubHelper';
import { expect, test } from '../helpers/hubPageErrors';

const USER = 'student4';
const SHOTS =
  process.env.UI_ARTIFACTS_DIR ||
  path.resolve(__dirname, '..', '..', '..', 'test-artifacts', 'ui');
const SIZES = [
  { width: 1280, height: 800 },
  { width: 375, height: 812 }
];

test.setTimeout(120 * 1000);

for (const scheme of ['light', 'dark'] as const) {
  test(`the spawn page fits a laptop and a phone, in the ${scheme} scheme`, async ({
    browser
  }) => {
    fs.mkdirSync(SHOTS, { recursive: true });
    const { context, page } = await signInToHome(browser, USER, scheme);
    // (the server a test before stopped may still be stopping: the home page says so)
    await expect(async () => {
      await page.goto('/hub/home');
      await expect(
        page.locator('#stop'),
        `${USER} must have no server running for the spawn page to show`
      ).toBeHidden({ timeout: 2000 });
    }).toPass({ timeout: 60 * 1000 });

    for (const size of SIZES) {
      await page.setViewportSize(size);
      await page.goto('/hub/spawn');
      await expect(page.locator('[data-profile="gpu-demo"]')).toBeVisible();

      // Then: no sideways scrolling.
      const { scrollWidth, clientWidth } = await page.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        clientWidth: document.documentElement.clientWidth
      }));
      expect(
        scrollWidth,
        `at ${size.width}x${size.height} the page is ${scrollWidth} px wide in a ${clientWidth} px window`
      ).toBeLessThanOrEqual(clientWidth);

      // And every card lies inside the window.
      for (const card of await page.locator('.gpus-card').all()) {
        const box = (await card.boundingBox())!;
        expect(box.x).toBeGreaterThanOrEqual(0);
        expect(box.x + box.width).toBeLessThanOrEqual(clientWidth + 0.5);
      }

      // And each GPU bar is a bar, not a sliver (at least 200 px on a laptop, half the
      // window on a phone), with its name and use readable beside it.
      const rows = page.locator('.gpus-bar-row');
      expect(await rows.count()).toBeGreaterThan(0);
      for (const row of await rows.all()) {
        const bar = (await row.locator('.gpus-bar').boundingBox())!;
        expect(
          bar.width,
          `a GPU bar is ${bar.width} px wide in a ${clientWidth} px window`
        ).toBeGreaterThanOrEqual(size.width < 600 ? 0.5 * clientWidth : 200);
        expect(bar.x + bar.width).toBeLessThanOrEqual(clientWidth + 0.5);
        for (const text of await row.locator(':scope > span').all()) {
          const box = (await text.boundingBox())!;
          expect(box.x + box.width).toBeLessThanOrEqual(clientWidth + 0.5);
          const clipped = await text.evaluate(
            element => element.scrollWidth > element.clientWidth
          );
          expect(clipped, `"${await text.innerText()}" is cut off`).toBe(false);
        }
      }

      await page.screenshot({
        path: path.join(
          SHOTS,
          `spawn-page-${size.width}x${size.height}-${scheme}.png`
        ),
        fullPage: true
      });
    }
    await context.close();
  });
}
