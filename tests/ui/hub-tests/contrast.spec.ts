/**
 * Through the demo hub (hub_config/local/): the spawn page's cards and the home page can
 * be read in the light and the dark colour scheme. Every text of a profile card has a
 * contrast of at least 4.5:1 (WCAG 2 AA, normal text) against what is behind it, as
 * Chromium computes the colours; screenshots go to test-artifacts/ui/.
 *
 * Plain Playwright, as demo-hub.spec.ts (pages of the hub itself).
 */
import { Page } from '@playwright/test';
import * as path from 'path';

import { SCREENSHOTS } from '../helpers/RunAsJobHelper';
import { expect, test } from '../helpers/hubPageErrors';

test.setTimeout(120 * 1000);

interface ITextContrast {
  text: string;
  ratio: number;
}

/**
 * The contrast of every text in `selector`'s elements against its effective background
 * (the nearest ancestor with an opaque background colour).
 */
async function contrasts(
  page: Page,
  selector: string
): Promise<ITextContrast[]> {
  return page.evaluate(selector => {
    function rgba(value: string): number[] {
      const parts = value.match(/[\d.]+/g)?.map(Number) ?? [0, 0, 0];
      return parts.length === 3 ? [...parts, 1] : parts;
    }
    function luminance([r, g, b]: number[]): number {
      const [R, G, B] = [r, g, b].map(c => {
        const s = c / 255;
        return s <= 0.03928 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
      });
      return 0.2126 * R + 0.7152 * G + 0.0722 * B;
    }
    function background(element: Element | null): number[] {
      while (element) {
        const colour = rgba(getComputedStyle(element).backgroundColor);
        if (colour[3] >= 1) {
          return colour;
        }
        element = element.parentElement;
      }
      return [255, 255, 255, 1];
    }
    const found: { text: string; ratio: number }[] = [];
    for (const root of Array.from(document.querySelectorAll(selector))) {
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = (node.textContent ?? '').trim();
        const element = node.parentElement;
        if (!text || !element || element.offsetParent === null) {
          continue;
        }
        const fore = rgba(getComputedStyle(element).color);
        const back = background(element);
        // A translucent text colour is blended over its background first.
        const blended = [0, 1, 2].map(
          i => fore[i] * fore[3] + back[i] * (1 - fore[3])
        );
        const [light, dark] = [luminance(blended), luminance(back)].sort(
          (a, b) => b - a
        );
        found.push({ text, ratio: (light + 0.05) / (dark + 0.05) });
      }
    }
    return found;
  }, selector);
}

async function logIn(page: Page, user: string): Promise<void> {
  await page.goto('/hub/login');
  await page.locator('input[name=username]').fill(user);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('#login_submit').click();
}

for (const colorScheme of ['light', 'dark'] as const) {
  test(`the spawn page's cards can be read in the ${colorScheme} scheme`, async ({
    browser
  }) => {
    // Given a student of the demo course on the spawn page, in this colour scheme
    const page = await (await browser.newContext({ colorScheme })).newPage();
    await logIn(page, 'student2');
    await page.goto('/hub/spawn/student2');
    await expect(page.locator('.gpus-card').first()).toBeVisible();

    // Then every text of every card, open or closed, stands out from its card
    const measured = await contrasts(page, '.gpus-card');
    expect(measured.length).toBeGreaterThan(10);
    const poor = measured.filter(item => item.ratio < 4.5);
    expect(poor, JSON.stringify(poor)).toEqual([]);
    await page.screenshot({
      path: path.join(SCREENSHOTS, `spawn-page-${colorScheme}.png`),
      fullPage: true
    });

    // And the home page, where the student has no server yet, is shown in the same scheme
    await page.goto('/hub/home');
    await expect(page.locator('#start')).toBeVisible();
    await page.screenshot({
      path: path.join(SCREENSHOTS, `home-page-${colorScheme}.png`),
      fullPage: true
    });
    await page.context().close();
  });
}
