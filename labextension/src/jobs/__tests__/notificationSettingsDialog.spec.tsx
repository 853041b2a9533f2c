/**
 * The Notification settings dialog as a user meets it, opened from the Jobs panel's
 * toolbar: their default read from the server, mail offered only where the server can
 * send it, a webhook's new secret shown once with a Copy button, the server's refusals
 * shown at their fields.
 */
import { Dialog } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { PromiseDelegate } from '@lumino/coreutils';
import { Widget } from '@lumino/widgets';
import { act } from 'react';

import { DEFAULT_FEATURES, JobsAPI } from '../../common/api';
import { JobAPIError } from '../../common/errors';
import { JobsModel } from '../jobsModel';
import { JobsPanel } from '../jobsPanel';
import { IJobServiceConfig, INotificationSettings } from '../../common/models';
import {
  NotificationSettingsDialog,
  notificationFieldOf
} from '../notificationSettingsDialog';
import { settle, typeInto } from '../../__tests__/jobsPanel.fixture';

(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

const SECRET = 'whsec-0123456789abcdef';

/**
 * A server keeping one user's settings; each PUT is answered when the test says.
 */
class SettingsServer {
  constructor(public settings: INotificationSettings) {}
  readonly puts: INotificationSettings[] = [];
  answers: PromiseDelegate<INotificationSettings>[] = [];

  async getNotificationSettings(): Promise<INotificationSettings> {
    return this.settings;
  }
  putNotificationSettings(
    body: INotificationSettings
  ): Promise<INotificationSettings> {
    this.puts.push(body);
    const answer = new PromiseDelegate<INotificationSettings>();
    this.answers.push(answer);
    return answer.promise;
  }
  async listRecentJobs() {
    return { jobs: [], next_token: null, total_count: 0 };
  }
  get api(): JobsAPI {
    return this as unknown as JobsAPI;
  }
}

function config(notify_email: boolean): IJobServiceConfig {
  return {
    mode: 'hub',
    version: '0.1.0',
    features: { ...DEFAULT_FEATURES, notify_email },
    max_notebook_bytes: 1024 * 1024
  };
}

class OpenDialog {
  constructor(
    readonly dialog: NotificationSettingsDialog,
    result: Promise<unknown>
  ) {
    result.then(
      () => (this.closed = true),
      () => (this.closed = true)
    );
  }
  closed = false;

  byTestId<T extends HTMLElement = HTMLElement>(id: string): T | null {
    return this.dialog.node.querySelector<T>(`[data-testid="${id}"]`);
  }
  get save(): HTMLButtonElement {
    return this.dialog.node.querySelector('.jp-JupyterToJob-submit')!;
  }
  async click(element: HTMLElement): Promise<void> {
    await settle(() => element.click());
  }
  async type(id: string, text: string): Promise<void> {
    await typeInto(this.byTestId<HTMLInputElement>(id)!, text);
  }
}

async function openDialog(
  server: SettingsServer,
  mail = true
): Promise<OpenDialog> {
  const dialog = new NotificationSettingsDialog({
    api: server.api,
    config: config(mail),
    trans: nullTranslator.load('jupyter_to_job')
  });
  let result: Promise<unknown> | null = null;
  await settle(() => {
    result = dialog.launch();
  });
  await settle();
  return new OpenDialog(dialog, result!);
}

afterEach(async () => {
  await act(async () => Dialog.flush());
});

describe('the Notification settings dialog', () => {
  it('opens from the Jobs panel’s toolbar', async () => {
    const server = new SettingsServer({});
    const panel = new JobsPanel({
      model: new JobsModel({ api: server.api }),
      docManager: null,
      contents: {} as any,
      config: config(true),
      trans: nullTranslator.load('jupyter_to_job')
    });
    await settle(() => Widget.attach(panel, document.body));
    await settle(() => panel.update());

    const button = panel.node.querySelector<HTMLButtonElement>(
      '[data-testid="jobs-notification-settings"]'
    )!;
    expect(button.textContent).toBe('Notification settings…');
    await settle(() => button.click());
    await settle();

    expect(
      document.body.querySelector('[data-testid="notification-settings"]')
    ).not.toBeNull();
    await settle(() => panel.dispose());
  });

  it('shows the saved default, and offers mail only where the server sends it', async () => {
    const server = new SettingsServer({
      default: {
        email: true,
        webhook_url: 'https://hooks.example.org/ada',
        on: ['failed']
      },
      webhook_secret_set: true
    });

    const withMail = await openDialog(server, true);
    expect(
      withMail.byTestId<HTMLInputElement>('notify-settings-email')!.checked
    ).toBe(true);
    expect(
      withMail.byTestId<HTMLInputElement>('notify-settings-webhook')!.value
    ).toBe('https://hooks.example.org/ada');
    expect(
      withMail.byTestId<HTMLInputElement>('notify-settings-on-failed')!.checked
    ).toBe(true);
    expect(
      withMail.byTestId<HTMLInputElement>('notify-settings-on-completed')!
        .checked
    ).toBe(false);
    expect(withMail.byTestId('secret-state')!.textContent).toContain(
      'A webhook secret is set'
    );
    await act(async () => Dialog.flush());

    const noMail = await openDialog(server, false);
    expect(noMail.byTestId('notify-settings-email')).toBeNull();
    expect(noMail.byTestId('notify-settings-webhook')).not.toBeNull();
  });

  it('shows a new webhook secret once, with Copy, and closes on Done', async () => {
    const server = new SettingsServer({});
    const open = await openDialog(server);
    expect(open.byTestId('notify-settings-rotate')).toBeNull();

    // When the user saves a webhook for failed and stopped jobs
    await open.type(
      'notify-settings-webhook',
      ' https://hooks.example.org/ada '
    );
    await open.click(open.byTestId('notify-settings-on-completed')!);
    await open.click(open.save);

    // Then the dialog asks for that default
    expect(server.puts).toEqual([
      {
        default: {
          email: false,
          webhook_url: 'https://hooks.example.org/ada',
          on: ['failed', 'stopped']
        }
      }
    ]);
    // and, the server having made a secret, shows it once and stays open
    await settle(() =>
      server.answers[0].resolve({
        default: server.puts[0].default,
        webhook_secret_set: true,
        webhook_secret: SECRET
      })
    );
    expect(open.closed).toBe(false);
    expect(open.byTestId<HTMLInputElement>('webhook-secret')!.value).toBe(
      SECRET
    );
    expect(open.byTestId('webhook-secret-shown')!.textContent).toContain(
      'it will not be shown again'
    );
    expect(open.save.textContent).toBe('Done');

    const written: string[] = [];
    Object.defineProperty(navigator, 'clipboard', {
      value: { writeText: async (text: string) => void written.push(text) },
      configurable: true
    });
    await open.click(open.byTestId('webhook-secret-copy')!);
    expect(written).toEqual([SECRET]);
    expect(open.byTestId('webhook-secret-copy')!.textContent).toBe('Copied');

    await open.click(open.save);
    expect(open.closed).toBe(true);
    expect(server.puts).toHaveLength(1);
  });

  it('makes a new secret on request', async () => {
    const server = new SettingsServer({
      default: { webhook_url: 'https://hooks.example.org/ada' },
      webhook_secret_set: true
    });
    const open = await openDialog(server);

    await open.click(open.byTestId('notify-settings-rotate')!);
    expect(server.puts[0].rotate_secret).toBe(true);
    await settle(() =>
      server.answers[0].resolve({
        ...server.puts[0],
        rotate_secret: false,
        webhook_secret_set: true,
        webhook_secret: 'whsec-new'
      })
    );

    expect(open.byTestId<HTMLInputElement>('webhook-secret')!.value).toBe(
      'whsec-new'
    );
    expect(open.closed).toBe(false);
  });

  it('saving without a new secret closes the dialog', async () => {
    const server = new SettingsServer({});
    const open = await openDialog(server);

    await open.click(open.byTestId('notify-settings-email')!);
    await open.click(open.save);
    await settle(() =>
      server.answers[0].resolve({
        default: server.puts[0].default,
        webhook_secret_set: false,
        webhook_secret: null
      })
    );

    expect(server.puts[0].default?.email).toBe(true);
    expect(open.closed).toBe(true);
  });

  it('shows the server’s refusal at the webhook field and stays open', async () => {
    const server = new SettingsServer({});
    const open = await openDialog(server);
    await open.type('notify-settings-webhook', 'http://hooks.example.org/');
    await open.click(open.save);

    const message =
      'the webhook URL must start with https:// (http:// is allowed only to localhost)';
    await settle(() =>
      server.answers[0].reject(
        new JobAPIError(new Response(null, { status: 400 }), {
          message: `The notification settings has errors: default.webhook_url: ${message}.`,
          reason: 'invalid',
          errors: [{ field: 'default.webhook_url', message }]
        })
      )
    );

    expect(open.closed).toBe(false);
    expect(open.byTestId('notify-webhook_url-problem')!.textContent).toBe(
      message
    );
    expect(
      open.byTestId('notify-settings-webhook')!.getAttribute('aria-invalid')
    ).toBe('true');
    expect(open.byTestId('notification-settings-error')!.textContent).toContain(
      'The notification settings has errors'
    );
  });
});

describe('notificationFieldOf', () => {
  it.each([
    ['default.webhook_url', 'webhook_url'],
    ['default.on.0', 'on'],
    ['default.email', 'email'],
    ['rotate_secret', null],
    ['webhook_secret', null]
  ])('puts %s at %s', (field, expected) => {
    expect(notificationFieldOf(field)).toBe(expected);
  });
});
