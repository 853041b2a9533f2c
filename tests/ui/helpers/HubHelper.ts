/**
 * The demo hub in the browser tests: signing a person in.
 */
import { Browser, BrowserContext, expect, Page } from '@playwright/test';

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
