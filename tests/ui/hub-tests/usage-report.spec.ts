/**
 * The GPU-hour usage report in an admin's browser, through the demo hub.
 *
 * Given the hub admin signs in with the report's address as where to go next (a
 * bookmark), they pass the hub's login and the course-sessions service's sign-in and get
 * the report, by course, as JSON: no token. Given the same address without its days, the
 * refusal is a 400 that says what to add to the address.
 */
import { expect, test } from '../helpers/hubPageErrors';

const REPORT = '/services/course-sessions/api/usage';

test("an admin opens the usage report from the browser's sign-in", async ({
  page
}) => {
  const today = new Date().toISOString().slice(0, 10);
  const address = `${REPORT}?from=${today}&to=${today}&by=course`;
  await page.goto(`/hub/login?next=${encodeURIComponent(address)}`);
  await page.locator('input[name=username]').fill('admin');
  await page.locator('input[name=password]').fill('any password');
  const [report] = await Promise.all([
    page.waitForResponse(
      r =>
        r.url().includes(REPORT) &&
        r.request().resourceType() === 'document' &&
        r.status() !== 302
    ),
    page.locator('#login_submit').click()
  ]);
  expect(report.status()).toBe(200);
  const body = await report.json();
  expect(body.by).toBe('course');
  expect(body.total).toHaveProperty('gpu_hours');

  const refused = await page.goto(`${REPORT}?to=${today}`);
  expect(refused!.status()).toBe(400);
  expect((await refused!.json()).message).toContain(
    'add from=DATE&to=DATE to the address'
  );
});
