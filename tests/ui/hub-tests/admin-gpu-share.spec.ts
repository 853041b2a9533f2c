/**
 * Through the demo hub (hub_config/local/): the hub's admin page tells an admin what each
 * GPU server holds. JupyterHub's table shows a server's user_options.profile, the profile
 * id the spawn API takes ("vision-lab-dev"); the spawner keeps the profile's title, the
 * GPU share and its GPU in its state, and gpuspawner/templates/admin.html shows them:
 * the title in the Profile column (the id in its tooltip) and a "GPU share" column.
 *
 * Nobody else's server test signs in as the researcher (zones.spec.ts only reads their
 * home page). Screenshots: test-artifacts/ui/admin-gpu-share-{light,dark}.png.
 */
import * as fs from 'fs';
import * as path from 'path';

import { expect, test } from '../helpers/hubPageErrors';
import { signInToHome } from '../helpers/HubHelper';

const USER = 'researcher';
const SHOTS =
  process.env.UI_ARTIFACTS_DIR ||
  path.resolve(__dirname, '..', '..', '..', 'test-artifacts', 'ui');

test.setTimeout(180 * 1000);

test("the admin page shows a GPU server's profile title and GPU share", async ({
  browser
}) => {
  fs.mkdirSync(SHOTS, { recursive: true });
  // Given the researcher runs a server on the vision lab's development share
  const researcher = await signInToHome(browser, USER);
  await researcher.page.goto('/hub/spawn');
  await researcher.page
    .locator('input[name=profile][value=vision-lab-dev]')
    .check();
  await researcher.page.getByRole('button', { name: 'Start' }).click();
  await expect(researcher.page).toHaveURL(new RegExp(`/user/${USER}/lab`), {
    timeout: 90 * 1000
  });

  try {
    for (const colorScheme of ['light', 'dark'] as const) {
      // When a hub admin opens the admin page
      const admin = await signInToHome(browser, 'admin', colorScheme);
      await admin.page.goto('/hub/admin');
      const row = admin.page.getByTestId(`user-row-${USER}`);
      await expect(row).toBeVisible({ timeout: 30 * 1000 });

      // Then the researcher's row names the profile by its title, with its id kept
      const profile = row.getByTestId('user-row-profile-used');
      await expect(profile).toHaveText('Vision lab development share');
      await expect(profile).toHaveAttribute(
        'title',
        'Profile id: vision-lab-dev'
      );
      // and tells the share and the GPU it is on, under its own column
      await expect(admin.page.locator('#gpu-share-header')).toHaveText(
        'GPU share'
      );
      const share = row.getByTestId('user-row-gpu-share');
      await expect(share.locator('[data-share]')).toHaveText(
        /^1\/4 of an? .+, 6 GiB$/
      );
      await expect(share.locator('[data-gpus]')).toHaveText(/^GPU \d/);
      // while a user with no server has an empty share
      await expect(
        admin.page
          .getByTestId('user-row-student2')
          .getByTestId('user-row-gpu-share')
      ).toHaveText('');

      await admin.page.screenshot({
        path: path.join(SHOTS, `admin-gpu-share-${colorScheme}.png`),
        fullPage: true
      });
      await admin.context.close();
    }
  } finally {
    await researcher.page.goto('/hub/home');
    await researcher.page.locator('#stop').click();
    await expect(researcher.page.locator('#start')).toBeVisible({
      timeout: 60 * 1000
    });
    await researcher.context.close();
  }
});
