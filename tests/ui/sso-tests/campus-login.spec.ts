/**
 * Campus single sign-on in Chromium: the demo hub with hub_config/sso/, which starts the
 * stand-in campus identity provider (hub_config/sso/campus_idp). A student signs in
 * through the provider's own form (a wrong password first), lands on the spawn page with
 * the course their campus groups enrol them in, and a visitor outside the allowed groups
 * gets the hub's refusal page.
 *
 * Plain Playwright; the hub is the `sso` webServer of playwright.config.js.
 */
import { APIRequestContext, Page } from '@playwright/test';
import { expect, test } from '../helpers/hubPageErrors';
import * as path from 'path';

import { SCREENSHOTS } from '../helpers/RunAsJobHelper';

const IDP = process.env.UI_SSO_IDP_URL ?? '';
const PASSWORD = 'campus-demo';

test.setTimeout(120 * 1000);

/** The hub starts the provider as a service: wait until it answers. */
async function providerReady(request: APIRequestContext): Promise<void> {
  await expect
    .poll(
      async () => {
        try {
          const discovery = await request.get(
            `${IDP}/.well-known/openid-configuration`
          );
          return discovery.status();
        } catch {
          return 0;
        }
      },
      { timeout: 60 * 1000 }
    )
    .toBe(200);
}

/** From the hub's login page to the provider's form. */
async function openCampusLogin(page: Page): Promise<void> {
  await page.goto('/hub/login');
  const button = page.locator('a[role=button][href*="oauth_login"]');
  await expect(button).toContainText('campus login');
  await button.click();
  await expect(page).toHaveURL(url => url.toString().startsWith(IDP));
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(
    'Campus login (demo)'
  );
}

async function signIn(
  page: Page,
  user: string,
  password: string
): Promise<void> {
  await page.getByLabel('User name').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

test.beforeEach(async ({ request }) => {
  await providerReady(request);
});

test('a student signs in through the campus login and finds their course open', async ({
  page
}) => {
  // Given the hub's login page sends the student to the campus provider's form
  await openCampusLogin(page);

  // When they mistype their password, the provider says so and keeps their user name
  await signIn(page, 'student1', 'not my password');
  await expect(page.getByRole('alert')).toHaveText(
    'Wrong user name or password.'
  );
  await expect(page.getByLabel('User name')).toHaveValue('student1');
  await page.screenshot({
    path: path.join(SCREENSHOTS, 'sso-wrong-password.png'),
    fullPage: true
  });

  // Then with the right one they are back on the hub, signed in
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/hub\/(spawn|home)/);
  await page.goto('/hub/spawn');

  // And the course their campus group enrols them in is offered, open now
  const card = page.locator('.gpus-card[data-profile="gpu-demo"]');
  await expect(card).toContainText('GPU demo course');
  await expect(card).toHaveAttribute('data-available', 'true');
  await page.screenshot({
    path: path.join(SCREENSHOTS, 'sso-spawn-page.png'),
    fullPage: true
  });

  // And the hub knows their groups from the provider
  const cookies = await page.context().cookies();
  const xsrf = cookies.find(cookie => cookie.name === '_xsrf')?.value ?? '';
  const model = await page.request.get('/hub/api/user', {
    headers: { 'X-XSRFToken': xsrf }
  });
  expect(model.status()).toBe(200);
  const user = await model.json();
  expect(user.name).toBe('student1');
  expect([...user.groups].sort()).toEqual([
    'course-gpu-demo-students',
    'students'
  ]);
});

test('a campus account outside the allowed groups is turned away with a clear page', async ({
  page
}) => {
  await openCampusLogin(page);
  await signIn(page, 'visitor', PASSWORD);
  await expect(page.locator('h1')).toContainText('Not allowed on this hub');
  await expect(page.locator('.error')).toContainText(
    'not in a group that may use this GPU hub'
  );
  await page.screenshot({
    path: path.join(SCREENSHOTS, 'sso-not-allowed.png'),
    fullPage: true
  });
});

test('after Logout, Sign in shows the campus login form again, not the same account', async ({
  page
}) => {
  // Given a student signed in through the campus login (a shared lab PC)
  await openCampusLogin(page);
  await signIn(page, 'student2', PASSWORD);
  await expect(page).toHaveURL(/\/hub\/(spawn|home)/);

  // When they log out of the hub, and confirm at the campus login
  await page.goto('/hub/home');
  await page.getByRole('button', { name: 'Logout' }).click();
  await expect(page).toHaveURL(url => url.toString().startsWith(IDP));
  await expect(page.locator('body')).toContainText('Do you want to sign out');
  await page.screenshot({
    path: path.join(SCREENSHOTS, 'sso-logout-confirm.png'),
    fullPage: true
  });
  await page.getByRole('button', { name: 'Sign out', exact: true }).click();

  // Then they are back on the hub's login page
  await expect(page).toHaveURL(/\/hub\/login/);

  // And "Sign in" asks who is there: the provider's form, not the previous account
  await openCampusLogin(page);
  await expect(page.getByLabel('Password')).toBeVisible();
});

test('the refusal page offers to sign in as someone else', async ({ page }) => {
  // Given a visitor outside the allowed groups was turned away
  await openCampusLogin(page);
  await signIn(page, 'visitor', PASSWORD);
  await expect(page.locator('h1')).toContainText('Not allowed on this hub');

  // When they choose to sign in as someone else and confirm at the campus login
  await page.getByRole('link', { name: 'Sign in as someone else' }).click();
  await expect(page).toHaveURL(url => url.toString().startsWith(IDP));
  await page.getByRole('button', { name: 'Sign out', exact: true }).click();

  // Then the campus login form asks for an account again
  await expect(page).toHaveURL(/\/hub\/login/);
  await openCampusLogin(page);
  await signIn(page, 'student3', PASSWORD);
  await expect(page).toHaveURL(/\/hub\/(spawn|home)/);
});
