import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

const SCREENSHOTS = path.resolve(
  __dirname,
  '..',
  '..',
  '..',
  'test-artifacts',
  'ui'
);
const OPEN_JOBS_PANEL = 'jupyter-to-job:open-jobs-panel';

test.describe('The Jobs panel', () => {
  test('a user opens it from the command palette and sees a Jobs tab', async ({
    page
  }) => {
    // Given JupyterLab with Run as Job (galata has loaded /lab)
    // When the user runs "Jobs" from the command palette
    await page.keyboard.press('Control+Shift+C');
    const palette = page.locator('#modal-command-palette');
    await palette.locator('input').fill('Jobs');
    await palette
      .locator(`[data-command="${OPEN_JOBS_PANEL}"]`)
      .first()
      .click();

    // Then a Jobs tab is open and current in the main area
    const tab = page.activity.getTabLocator('Jobs');
    await expect(tab).toBeVisible();
    await expect(tab).toHaveClass(/lm-mod-current/);
    await expect(page.locator('#jp-JupyterToJob-jobsPanel')).toBeVisible();
    await page.screenshot({ path: path.join(SCREENSHOTS, 'jobs-panel.png') });
  });

  test('running the command again brings the same tab forward', async ({
    page
  }) => {
    // Given the Jobs panel is open and then hidden behind the Launcher
    await page.evaluate(
      command => window.jupyterapp.commands.execute(command),
      OPEN_JOBS_PANEL
    );
    await page.evaluate(() =>
      window.jupyterapp.commands.execute('launcher:create')
    );
    await expect(page.activity.getTabLocator('Jobs')).not.toHaveClass(
      /lm-mod-current/
    );

    // When the command runs again
    await page.evaluate(
      command => window.jupyterapp.commands.execute(command),
      OPEN_JOBS_PANEL
    );

    // Then there is still one Jobs tab, and it is the current one
    const tabs = page.locator('#jp-main-dock-panel .lm-TabBar-tab', {
      hasText: 'Jobs'
    });
    await expect(tabs).toHaveCount(1);
    await expect(tabs).toHaveClass(/lm-mod-current/);
  });
});
