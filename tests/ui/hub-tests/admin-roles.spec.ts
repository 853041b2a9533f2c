/**
 * Through the demo hub (hub_config/local/): the hub's admin page offers each viewer only
 * the actions their scopes allow (gpuspawner/templates/admin.html). The GPU demo course's
 * instructor may list their students and stop their servers, nothing more; a hub admin
 * keeps every action.
 *
 * Plain Playwright, as demo-hub.spec.ts (pages of the hub itself).
 */
import { Browser, Page } from '@playwright/test';
import * as path from 'path';

import { SCREENSHOTS } from '../helpers/RunAsJobHelper';
import { expect, test } from '../helpers/hubPageErrors';

test.setTimeout(120 * 1000);

const EVERYONE_ACTIONS = ['Start All', 'Stop All', 'Shutdown Hub', 'Add Users'];
const ROW_ACTIONS = [
  'Start Server',
  'Spawn Page',
  'Edit User',
  'Access Server'
];

async function adminPage(
  browser: Browser,
  user: string,
  colorScheme: 'light' | 'dark'
): Promise<Page> {
  const page = await (await browser.newContext({ colorScheme })).newPage();
  await page.goto('/hub/login');
  await page.locator('input[name=username]').fill(user);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('#login_submit').click();
  await page.goto('/hub/admin');
  // The student rows the viewer may list
  await expect(page.getByTestId('user-row-student1')).toBeVisible({
    timeout: 30 * 1000
  });
  return page;
}

for (const colorScheme of ['light', 'dark'] as const) {
  test(`the instructor's admin page offers no action their role is refused (${colorScheme})`, async ({
    browser
  }) => {
    // Given the course's instructor opens the hub's admin page
    const page = await adminPage(browser, 'instructor', colorScheme);

    // Then it lists their students, without the actions only an admin may take
    for (const name of [...EVERYONE_ACTIONS, 'Manage Groups', ...ROW_ACTIONS]) {
      await expect(
        page.getByRole('button', { name, exact: true }),
        `${name} is offered to the instructor`
      ).toHaveCount(0);
    }
    await page.screenshot({
      path: path.join(SCREENSHOTS, `admin-page-instructor-${colorScheme}.png`),
      fullPage: true
    });
    await page.context().close();
  });
}

test('a hub admin keeps every action of the admin page', async ({
  browser
}) => {
  const page = await adminPage(browser, 'admin', 'light');
  for (const name of EVERYONE_ACTIONS) {
    await expect(page.getByRole('button', { name, exact: true })).toBeVisible();
  }
  await expect(
    page
      .getByTestId('user-row-student1')
      .getByRole('button', { name: 'Edit User', exact: true })
  ).toBeVisible();
  await page.context().close();
});
