/**
 * The experimental zone's warning on the hub's home page, through the demo hub, in
 * Chromium. The test hub moves the demo zone's daily wipe to an hour from now
 * (jupyterhub_test_config.py), so its 2-hour warning has begun: once the researcher's
 * zone folder holds a file, the course-sessions service warns them, and their home page
 * shows it with the time left. The wipe itself, on a moved clock, is in
 * tests/sessions/test_zone_wipe.py.
 *
 * Screenshots in the light and the dark scheme go to $ZONE_SHOTS (default
 * /tmp/zone-shots).
 */
import { expect, test } from '../helpers/hubPageErrors';
import * as fs from 'fs';
import * as path from 'path';

import { signInToHome } from '../helpers/HubHelper';

// Nobody else's test signs in as the researcher: their home page has no other warning.
const USER = 'researcher';
const REPO = path.resolve(__dirname, '..', '..', '..');
const RUNTIME =
  process.env.UI_HUB_RUNTIME || path.join(REPO, '.run', 'ui-hub-tests');
const SHOTS = process.env.ZONE_SHOTS || '/tmp/zone-shots';

test.setTimeout(120 * 1000);

test("the experimental zone's coming wipe is shown on the home page of whoever holds data there", async ({
  browser
}) => {
  fs.mkdirSync(SHOTS, { recursive: true });
  const page = (await signInToHome(browser, USER, 'light')).page;
  const alert = page.locator(
    '#reclaim-home-warnings [data-reason="experimental-zone"]'
  );

  // Given the researcher's home page, while they hold nothing in the zone: no warning
  await page.waitForLoadState('networkidle');
  await expect(page.locator('#reclaim-home-warnings')).toBeAttached();
  await expect(alert).toHaveCount(0);

  // When a file appears in their zone folder (~/experimental of the Try-out area)
  const folder = path.join(RUNTIME, 'experimental', USER, 'experimental');
  fs.mkdirSync(folder, { recursive: true });
  fs.writeFileSync(path.join(folder, 'trial.py'), "print('does it run?')\n");

  // Then, after the service's next round, their home page warns them, with the time left
  await expect(async () => {
    await page.reload();
    await page.waitForLoadState('networkidle');
    await expect(alert).toBeVisible({ timeout: 2000 });
  }).toPass({ timeout: 60 * 1000 });
  await expect(alert).toContainText('Experimental zone:');
  await expect(alert).toContainText(
    /Your experimental-zone folders will be wiped (at|tomorrow at) \d\d:\d\d:/
  );
  await expect(alert).toContainText(
    'copy what you want to keep to your home or production storage before then.'
  );
  await expect(alert.locator('.reclaim-left')).toHaveText(
    /\((\d+ min|1 h) left\)/
  );
  await alert.screenshot({ path: path.join(SHOTS, 'home-warning-light.png') });
  await page.screenshot({ path: path.join(SHOTS, 'home-light.png') });
  await page.context().close();

  // And in the dark scheme too
  const dark = (await signInToHome(browser, USER, 'dark')).page;
  await dark.waitForLoadState('networkidle');
  const darkAlert = dark.locator(
    '#reclaim-home-warnings [data-reason="experimental-zone"]'
  );
  await expect(darkAlert).toBeVisible({ timeout: 20 * 1000 });
  await dark.screenshot({ path: path.join(SHOTS, 'home-dark.png') });
  await dark.context().close();
});
