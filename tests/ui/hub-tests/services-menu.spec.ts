/**
 * The hub's Services menu names its services for people, through the demo hub.
 *
 * Given student4 signed in on the hub's home page, when they open the Services menu,
 * then the course-sessions service is listed as "GPU map" (its address leads to the GPU
 * map) and the job service as "Jobs", not by their ids, and they lead there. No script
 * on the pages throws.
 *
 * The course-sessions service's own pages (the course page, the GPU map) have the same
 * menu as the hub's pages for the same person: the services they may open. Screenshots:
 * test-artifacts/ui/services-menu-course-page-{light,dark}.png.
 */
import * as fs from 'fs';
import * as path from 'path';

import { Page } from '@playwright/test';

import { signInToHome } from '../helpers/HubHelper';
import { expect, test } from '../helpers/hubPageErrors';

const SHOTS =
  process.env.UI_ARTIFACTS_DIR ||
  path.resolve(__dirname, '..', '..', '..', 'test-artifacts', 'ui');

/** The Services menu of the page, opened: each entry's name and address. */
async function servicesMenu(page: Page): Promise<string[]> {
  await page.locator('nav .dropdown-toggle', { hasText: 'Services' }).click();
  const items = page.locator('nav .dropdown-menu .dropdown-item');
  await expect(items.first()).toBeVisible();
  const entries = [];
  for (const item of await items.all()) {
    entries.push(
      `${(await item.innerText()).trim()} -> ${await item.getAttribute('href')}`
    );
  }
  return entries;
}

test('the Services menu lists the GPU map and the jobs page by their names, not their ids', async ({
  browser
}) => {
  const { context, page } = await signInToHome(browser, 'student4');
  await page
    .getByRole('button', { name: 'Services' })
    .or(page.locator('nav .dropdown-toggle', { hasText: 'Services' }))
    .first()
    .click();
  const items = page.locator('nav .dropdown-menu .dropdown-item');
  await expect(items.first()).toBeVisible();
  const names = (await items.allInnerTexts()).map(name => name.trim());
  expect(names).toContain('GPU map');
  expect(names).not.toContain('course-sessions');
  expect(names).toContain('Jobs');
  expect(names).not.toContain('jupyter-to-job');
  await expect(items.filter({ hasText: /^\s*Jobs\s*$/ })).toHaveAttribute(
    'href',
    /\/services\/jupyter-to-job\/$/
  );

  await items.filter({ hasText: 'GPU map' }).click();
  await expect(page).toHaveURL(/\/services\/course-sessions\/gpus/);
  await expect(page.getByRole('heading', { name: 'GPU map' })).toBeVisible();
  await context.close();
});

test("the course page and the GPU map have the hub's Services menu for their viewer", async ({
  browser
}) => {
  fs.mkdirSync(SHOTS, { recursive: true });
  for (const colorScheme of ['light', 'dark'] as const) {
    // Given the instructor's Services menu on the hub's home page
    const { context, page } = await signInToHome(
      browser,
      'instructor',
      colorScheme
    );
    const onTheHub = await servicesMenu(page);
    expect(onTheHub).toContain('GPU map -> /services/course-sessions/');
    expect(onTheHub).toContain('Jobs -> /services/jupyter-to-job/');

    // When they open their course page, then the GPU map
    await page.goto('/services/course-sessions/courses');
    await expect(page.locator('#course-gpu-demo')).toBeVisible();
    // Then each has the same menu, leading to the same places
    expect(await servicesMenu(page)).toEqual(onTheHub);
    await page.screenshot({
      path: path.join(SHOTS, `services-menu-course-page-${colorScheme}.png`)
    });
    await page.keyboard.press('Escape');
    await page.goto('/services/course-sessions/gpus');
    await expect(page.getByRole('heading', { name: 'GPU map' })).toBeVisible();
    expect(await servicesMenu(page)).toEqual(onTheHub);
    await context.close();
  }
});
