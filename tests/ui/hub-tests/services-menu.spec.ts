/**
 * The hub's Services menu names its services for people, through the demo hub.
 *
 * Given student4 signed in on the hub's home page, when they open the Services menu,
 * then the course-sessions service is listed as "GPU map" (its address leads to the GPU
 * map) and the job service as "Jobs", not by their ids, and they lead there. No script
 * on the pages throws.
 */
import { signInToHome } from '../helpers/HubHelper';
import { expect, test } from '../helpers/hubPageErrors';

test('the Services menu lists the GPU map and the jobs page by their names, not their ids', async ({
  browser
}) => {
  const { context, page } = await signInToHome(browser, 'student4');
  await page.getByRole('button', { name: 'Services' }).or(
    page.locator('nav .dropdown-toggle', { hasText: 'Services' })
  ).first().click();
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
