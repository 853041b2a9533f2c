/**
 * Environments to choose from, through the demo hub (hub_config/local/), in Chromium: the
 * GPU demo course offers the hub's own Python (the default) and a course venv. A student
 * picks the second by its title on the spawn card, starts, and the kernels of their server
 * run the venv's Python. The student is student4 (jupyterhub_test_config.py enrols them):
 * after their server stops, the hub no longer sends them to the spawn page at login,
 * which the other tests of this hub expect of their students.
 *
 * Screenshots of the card in the light and the dark scheme go to $ENVIRONMENT_SHOTS
 * (default /tmp/environment-shots).
 */
import { Page } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

import { signInToHome } from '../helpers/HubHelper';
import { expect, test } from '../helpers/hubPageErrors';

const USER = 'student4';
const SHOTS = process.env.ENVIRONMENT_SHOTS || '/tmp/environment-shots';

test.setTimeout(180 * 1000);

/** Run `code` in a new kernel of the user's server, as JupyterLab does, from its page:
 * the kernels REST API (with the server's _xsrf cookie, the first the page sees), then
 * execute_request on the kernel's websocket; returns what the code prints. */
async function runInKernel(page: Page, code: string): Promise<string> {
  return page.evaluate(
    async ({ user, code }) => {
      const xsrf =
        document.cookie
          .split('; ')
          .find(item => item.startsWith('_xsrf='))
          ?.slice('_xsrf='.length) ?? '';
      const base = `/user/${user}/api/kernels`;
      const headers = {
        'Content-Type': 'application/json',
        'X-XSRFToken': xsrf
      };
      const started = await fetch(base, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'python3' })
      });
      if (started.status !== 201) {
        throw new Error(
          `starting a kernel: ${started.status} ${await started.text()}`
        );
      }
      const kernel = (await started.json()).id as string;
      try {
        return await new Promise<string>((resolve, reject) => {
          const url = `${location.origin.replace(/^http/, 'ws')}${base}/${kernel}/channels`;
          const socket = new WebSocket(url);
          const id = `environments-${Date.now()}`;
          let printed = '';
          socket.onopen = () =>
            socket.send(
              JSON.stringify({
                header: {
                  msg_id: id,
                  msg_type: 'execute_request',
                  username: user,
                  session: id,
                  date: '',
                  version: '5.3'
                },
                parent_header: {},
                metadata: {},
                content: { code, silent: false, store_history: false },
                channel: 'shell',
                buffers: []
              })
            );
          socket.onerror = () =>
            reject(new Error('the kernel websocket failed'));
          socket.onmessage = event => {
            const message = JSON.parse(event.data);
            if (message.parent_header?.msg_id !== id) {
              return;
            }
            if (message.msg_type === 'stream') {
              printed += message.content.text;
            } else if (message.msg_type === 'error') {
              reject(new Error(message.content.evalue));
            } else if (
              message.msg_type === 'status' &&
              message.content.execution_state === 'idle'
            ) {
              socket.close();
              resolve(printed);
            }
          };
        });
      } finally {
        await fetch(`${base}/${kernel}`, { method: 'DELETE', headers });
      }
    },
    { user: USER, code }
  );
}

async function stopServer(page: Page): Promise<void> {
  await page.goto('/hub/home');
  const stop = page.locator('#stop');
  if (await stop.isVisible()) {
    await stop.click();
    await expect(page.locator('#start')).toBeVisible({ timeout: 60 * 1000 });
  }
}

test('a student picks the course venv on the spawn card and the server runs its Python', async ({
  browser
}) => {
  fs.mkdirSync(SHOTS, { recursive: true });
  // Given a student of the GPU demo course on the spawn page, in the dark scheme too
  const dark = (await signInToHome(browser, USER, 'dark')).page;
  await dark.goto(`/hub/spawn/${USER}`);
  const darkCard = dark.locator('.gpus-card[data-profile="gpu-demo"]');
  await expect(darkCard.locator('.gpus-environments')).toBeVisible();
  await darkCard.screenshot({ path: path.join(SHOTS, 'card-dark.png') });
  await dark.context().close();

  const page = (await signInToHome(browser, USER, 'light')).page;
  await page.goto(`/hub/spawn/${USER}`);
  const card = page.locator('.gpus-card[data-profile="gpu-demo"]');
  const group = card.getByRole('group', { name: 'Environment' });

  // Then the card offers both environments, each named by its title and described by
  // its description, the hub's Python chosen
  const standard = group.getByRole('radio', { name: 'Standard Python' });
  const venv = group.getByRole('radio', { name: 'Course virtual environment' });
  await expect(standard).toBeChecked();
  await expect(venv).not.toBeChecked();
  await expect(venv).toHaveAccessibleDescription(
    /A separate venv for the course's exercises\. Contains Python 3, JupyterLab 4\./
  );
  // And the other cards offer none
  await expect(
    page.locator('.gpus-card[data-profile="cpu"] .gpus-environments')
  ).toHaveCount(0);

  // When the student (on the CPU card before) clicks the venv's title
  await page.locator('input[name=profile][value=cpu]').check();
  await group
    .locator('.gpus-env-title', { hasText: 'Course virtual environment' })
    .click();

  // Then the venv and the course are chosen
  await expect(venv).toBeChecked();
  await expect(standard).not.toBeChecked();
  await expect(
    page.locator('input[name=profile][value=gpu-demo]')
  ).toBeChecked();
  await card.screenshot({ path: path.join(SHOTS, 'card-light.png') });

  // When they start
  await page.getByRole('button', { name: 'Start' }).click();
  try {
    await expect(page).toHaveURL(new RegExp(`/user/${USER}/lab`), {
      timeout: 90 * 1000
    });
    await expect(page.locator('#jp-main-dock-panel')).toBeVisible({
      timeout: 60 * 1000
    });

    // Then the server's kernels run the course venv's Python
    const prefix = await runInKernel(page, 'import sys; print(sys.prefix)');
    expect(prefix.trim()).toMatch(/\/course-venv$/);
  } finally {
    // Free the course seat for the other tests of this hub
    await stopServer(page);
    await page.context().close();
  }
});
