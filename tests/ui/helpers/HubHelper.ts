/**
 * A hub in the browser tests (the demo hub, the chart-deployed hub): signing a person in,
 * starting their server, and JupyterLab behind the hub, where galata's fixtures (made
 * for a standalone server) do not reach.
 */
import { Browser, BrowserContext, expect, Page } from '@playwright/test';
import * as path from 'path';

/**
 * Sign `user` in to the demo hub (it takes any password), in a new browser context
 * of `colorScheme`, and wait on the home page until it is quiet: the home page signs
 * in to the course-sessions service in a hidden frame (reclaim warnings), and two
 * sign-ins to one service at once trip over each other's OAuth state.
 */
export async function signInToHome(
  browser: Browser,
  user: string,
  colorScheme: 'light' | 'dark' = 'light'
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ colorScheme });
  const page = await context.newPage();
  await page.goto('/hub/login?next=%2Fhub%2Fhome');
  await page.locator('input[name=username]').fill(user);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('#login_submit').click();
  await expect(page).toHaveURL(/\/hub\/home/);
  await page.waitForLoadState('networkidle');
  return { context, page };
}

/**
 * Sign `user` in on the hub's login page (the demo hub and the chart's dummy
 * authenticator take any password); the hub then sends them to their spawn page.
 */
export async function signIn(page: Page, user: string): Promise<void> {
  await page.goto('/hub/login');
  await page.locator('input[name=username]').fill(user);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('#login_submit').click();
}

/**
 * On the spawn page: choose the card of `profile`, start, and wait until `user`'s
 * JupyterLab has loaded behind the hub.
 */
export async function startFromSpawnPage(
  page: Page,
  user: string,
  profile: string
): Promise<void> {
  await page.locator(`input[name=profile][value="${profile}"]`).check();
  await page.getByRole('button', { name: 'Start' }).click();
  await expect(page).toHaveURL(new RegExp(`/user/${user}/lab`), {
    timeout: 120 * 1000
  });
  await expect(page.locator('#jp-main-dock-panel')).toBeVisible({
    timeout: 60 * 1000
  });
}

/**
 * A request to `user`'s server behind the hub, with the xsrf cookie the browser holds.
 */
export async function serverRequest(
  page: Page,
  user: string,
  method: 'GET' | 'POST' | 'PUT',
  address: string,
  data?: Record<string, unknown>
) {
  const cookies = await page.context().cookies();
  const xsrf = cookies.find(cookie => cookie.name === '_xsrf')?.value ?? '';
  return page.request.fetch(`/user/${user}/${address}`, {
    method,
    headers: { 'X-XSRFToken': xsrf },
    data
  });
}

/**
 * Close JupyterLab's question about news, which would hide part of a screenshot.
 */
export async function dismissNews(page: Page): Promise<void> {
  const news = page.locator('.Toastify__toast', { hasText: 'Jupyter news' });
  if (await news.isVisible()) {
    await news.getByRole('button', { name: 'No', exact: true }).click();
    await expect(news).toBeHidden();
  }
}

/**
 * Choose `menuPath` ("Settings>Theme>JupyterLab Dark") in JupyterLab's main menu, behind a
 * hub, where galata's helpers do not reach.
 */
export async function clickMenuItem(
  page: Page,
  menuPath: string
): Promise<void> {
  const [top, ...items] = menuPath.split('>');
  const exactly = (label: string) =>
    new RegExp(`^${label.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
  // Again from the start if the menu closes on the way (a panel taking the focus).
  await expect(async () => {
    await page.keyboard.press('Escape');
    await page
      .locator('.lm-MenuBar-itemLabel', { hasText: exactly(top) })
      .click({ timeout: 5 * 1000 });
    for (const label of items) {
      await page
        .locator('.lm-Menu .lm-Menu-item')
        .filter({
          has: page.locator('.lm-Menu-itemLabel', { hasText: exactly(label) })
        })
        .first()
        .click({ timeout: 5 * 1000 });
    }
  }).toPass({ timeout: 60 * 1000 });
}

/**
 * Save `<name>-light.png` and `<name>-dark.png` of JupyterLab behind a hub, in the
 * browser's dark and then light scheme, which the lab follows (the environment's default,
 * jupyter-config/lab/settings/overrides.d/), and go back to the light one.
 */
export async function labScreenshotsLightAndDark(
  page: Page,
  folder: string,
  name: string
): Promise<void> {
  for (const scheme of ['dark', 'light'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await expect(page.locator('body')).toHaveAttribute(
      'data-jp-theme-name',
      scheme === 'dark' ? 'JupyterLab Dark' : 'JupyterLab Light'
    );
    // (the lab shows its splash screen while it changes theme)
    await expect(page.locator('#jupyterlab-splash')).toHaveCount(0, {
      timeout: 30 * 1000
    });
    await dismissNews(page); // (none by default; a person may have asked for it)
    await page.screenshot({ path: path.join(folder, `${name}-${scheme}.png`) });
  }
}

/**
 * Save `<name>-light.png` and `<name>-dark.png` of a hub page (which follows the
 * browser's colour scheme), and go back to the light scheme.
 */
export async function hubScreenshotsLightAndDark(
  page: Page,
  folder: string,
  name: string
): Promise<void> {
  for (const scheme of ['dark', 'light'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.reload();
    await expect(page.locator('html')).toHaveAttribute('data-bs-theme', scheme);
    await page.screenshot({
      path: path.join(folder, `${name}-${scheme}.png`),
      fullPage: true
    });
  }
}
