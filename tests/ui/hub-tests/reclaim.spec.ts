/**
 * GPU-aware reclaim through the demo hub, as a student sees it: a quarter GPU whose
 * simulated NVML readings say it is idle is warned about in JupyterLab (a notification
 * with "I'm still using it", and the status bar) and on the hub's home page; keeping it
 * works once, and the next warning offers no keep button.
 *
 * The profile "idle-gpu" (tests/ui/jupyterhub_test_config.py) is reclaimed after a minute
 * without GPU use and warns 10 minutes ahead, so the warning comes at the service's first
 * round that sees the server (every 2 s here). The readings file is the demo hub's
 * (GPUSPAWNER_DEMO_GPU_READINGS, default <runtime>/gpu-readings.json).
 */
import { Page } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';
import { expect, test } from '../helpers/hubPageErrors';

const USER = 'student2';
const REPO = path.resolve(__dirname, '..', '..', '..');
const READINGS = path.join(REPO, '.run', 'ui-hub-tests', 'gpu-readings.json');
const SHOTS = process.env.RECLAIM_SHOTS || '/tmp/reclaim-shots';

test.setTimeout(180 * 1000);

/** Simulated NVML readings: both GPUs of the demo hub idle. */
function idleGPUs(): void {
  const device = (index: number) => ({
    uuid: `sim-${index}`,
    index,
    utilization_pct: 0,
    memory_used_mib: 512,
    memory_total_mib: 24576,
    temperature_c: 38
  });
  const temporary = `${READINGS}.tmp`;
  fs.writeFileSync(
    temporary,
    JSON.stringify({ devices: [device(0), device(1)] })
  );
  fs.renameSync(temporary, READINGS);
}

async function shot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, name) });
}

test('an idle quarter GPU is warned about in JupyterLab and on the home page, and kept once', async ({
  page,
  browser
}) => {
  // Given both GPUs read idle, and the student starts the idle-gpu profile
  idleGPUs();
  await page.goto('/hub/login');
  await page.locator('input[name=username]').fill(USER);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('#login_submit').click();
  await expect(page).toHaveURL(/\/hub\/spawn/);
  await page.locator('input[name=profile][value=idle-gpu]').check();
  await page.getByRole('button', { name: 'Start' }).click();
  await expect(page.locator('#jp-main-dock-panel')).toBeVisible({
    timeout: 90 * 1000
  });

  // Then JupyterLab shows the hub's warning as a notification, with the keep button
  const toast = page.locator('.Toastify__toast', {
    hasText: 'will be stopped at'
  });
  await expect(toast).toBeVisible({ timeout: 60 * 1000 });
  await expect(toast).toContainText('its GPU has not been used for 1 min');
  const keep = toast.getByRole('button', { name: "I'm still using it" });
  await expect(keep).toBeVisible();
  // and the status bar counts down to the stop
  await expect(page.getByTestId('session-status')).toContainText(
    /stops in \d+ min \(GPU idle\)/
  );
  await expect(toast).toBeInViewport({ ratio: 1 }); // done sliding in
  await shot(page, 'lab-notification-light.png');

  // And the hub's home page shows it too, with the time left and the keep button
  const home = await page.context().newPage();
  await home.goto('/hub/home');
  const homeWarning = home.locator('#reclaim-home .alert', {
    hasText: 'will be stopped at'
  });
  await expect(homeWarning).toBeVisible({ timeout: 30 * 1000 });
  await expect(homeWarning).toContainText(/\(\d+ min left\)/);
  await expect(
    homeWarning.getByRole('button', { name: "I'm still using it" })
  ).toBeVisible();
  await shot(home, 'home-warning-light.png');
  const dark = await browser.newContext({
    colorScheme: 'dark',
    storageState: await page.context().storageState()
  });
  const darkHome = await dark.newPage();
  await darkHome.goto(home.url());
  await expect(darkHome.locator('#reclaim-home .alert')).toBeVisible({
    timeout: 30 * 1000
  });
  await shot(darkHome, 'home-warning-dark.png');
  await dark.close();

  // When the student answers "I'm still using it" in JupyterLab
  await keep.click();

  // Then the hub keeps the server: JupyterLab says so
  await expect(
    page.locator('.Toastify__toast', { hasText: 'keeps running' })
  ).toBeVisible({ timeout: 20 * 1000 });

  // And the next warning (still idle) can no longer be kept, on either page
  const again = page.locator('.Toastify__toast', {
    hasText: 'will be stopped at'
  });
  await expect(again).toBeVisible({ timeout: 60 * 1000 });
  await expect(
    again.getByRole('button', { name: "I'm still using it" })
  ).toHaveCount(0);
  await expect(async () => {
    await home.reload();
    await expect(homeWarning).toBeVisible({ timeout: 5 * 1000 });
  }).toPass({ timeout: 30 * 1000 });
  await expect(
    home.locator('#reclaim-home').getByRole('button', {
      name: "I'm still using it"
    })
  ).toHaveCount(0);

  // The notification in JupyterLab's dark theme, which the lab takes from the system's
  // scheme (it may reload, then warns again)
  await page.emulateMedia({ colorScheme: 'dark' });
  await expect(page.locator('body[data-jp-theme-light="false"]')).toHaveCount(
    1,
    { timeout: 20 * 1000 }
  );
  await expect(page.locator('#jp-main-dock-panel')).toBeVisible({
    timeout: 60 * 1000
  });
  await expect(again).toBeInViewport({ ratio: 1, timeout: 60 * 1000 });
  await shot(page, 'lab-notification-dark.png');
});

test('the home page keeps an idle server once, and then offers no keep button', async ({
  page
}) => {
  // Given both GPUs read idle, and another student runs the idle-gpu profile
  idleGPUs();
  await page.goto('/hub/login');
  await page.locator('input[name=username]').fill('student3');
  await page.locator('input[name=password]').fill('any password');
  await page.locator('#login_submit').click();
  await expect(page).toHaveURL(/\/hub\/spawn/);
  await page.locator('input[name=profile][value=idle-gpu]').check();
  await page.getByRole('button', { name: 'Start' }).click();
  await expect(page.locator('#jp-main-dock-panel')).toBeVisible({
    timeout: 90 * 1000
  });

  // When they answer "I'm still using it" on the hub's home page
  await page.goto('/hub/home');
  const warning = page.locator('#reclaim-home .alert', {
    hasText: 'will be stopped at'
  });
  await expect(warning).toBeVisible({ timeout: 30 * 1000 });
  await warning.getByRole('button', { name: "I'm still using it" }).click();

  // Then the hub's home page comes back, and once the service warns again (the GPU is
  // still idle) the warning has no keep button: keeping works once
  await expect(page).toHaveURL(/\/hub\/home/);
  await expect(async () => {
    await page.reload();
    await expect(warning).toBeVisible({ timeout: 5 * 1000 });
  }).toPass({ timeout: 30 * 1000 });
  await expect(
    page.locator('#reclaim-home').getByRole('button', {
      name: "I'm still using it"
    })
  ).toHaveCount(0);
  // and the server still runs
  await expect(page.locator('#stop')).toBeVisible();
});
