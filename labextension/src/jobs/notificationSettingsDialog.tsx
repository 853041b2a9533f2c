/**
 * "Notification settings…" of the Jobs panel: the user's default for jobs created
 * without their own notify (mail, a signed webhook, which endings), and a new webhook
 * secret on demand. A secret the server made is shown once, with a Copy button.
 */
import { Clipboard } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { featuresOf, JobsAPI } from '../common/api';
import { errorSentence, JobAPIError } from '../common/errors';
import { FormBody, FormDialog } from '../common/formDialog';
import { FormError, problemsByField } from '../common/formError';
import { Checkbox, Field, FieldGroup } from '../common/formFields';
import {
  IFieldProblem,
  IJobServiceConfig,
  INotificationSettings,
  NotifyEvent
} from '../common/models';
import { TextButton } from '../common/textButton';
import { Hint } from '../common/hint';

/**
 * What the dialog needs.
 */
export interface INotificationSettingsOptions {
  api: JobsAPI;
  /**
   * The server's config: mail is offered only where `features.notify_email`.
   */
  config: IJobServiceConfig | null;
  trans: TranslationBundle;
}

/**
 * The endings a user can choose, in the server's order.
 */
export const NOTIFY_EVENTS: readonly NotifyEvent[] = [
  'completed',
  'failed',
  'stopped'
];

/**
 * The fields a server problem can be shown at.
 */
export type NotificationField = 'email' | 'webhook_url' | 'on';

/**
 * The field of the form a server problem names (`default.webhook_url`,
 * `default.on.0`); null for one shown at the foot.
 */
export function notificationFieldOf(field: string): NotificationField | null {
  const [top, name] = field.split('.');
  if (top !== 'default') {
    return null;
  }
  return name === 'email' || name === 'webhook_url' || name === 'on'
    ? name
    : null;
}

/**
 * The dialog: Cancel, or Save (closes once saved, unless a new secret is to be
 * shown: then it reads Done and closes on the next press).
 */
export class NotificationSettingsDialog extends FormDialog<INotificationSettings | null> {
  constructor(options: INotificationSettingsOptions) {
    const { trans } = options;
    const shown = { dialog: null as NotificationSettingsDialog | null };
    const body = new NotificationSettingsBody(options, () =>
      shown.dialog?.renameSubmit(trans.__('Done'))
    );
    super({
      title: trans.__('Notification settings'),
      body,
      trans,
      submitLabel: trans.__('Save')
    });
    this._settings = body;
    shown.dialog = this;
  }

  protected send(): Promise<boolean> {
    return this._settings.save();
  }

  private _settings: NotificationSettingsBody;
}

/**
 * The body of the dialog.
 */
export class NotificationSettingsBody extends FormBody<
  INotificationSettingsOptions,
  INotificationSettings | null
> {
  constructor(
    options: INotificationSettingsOptions,
    onSecretShown: () => void = () => undefined
  ) {
    super(options);
    this._onSecretShown = onSecretShown;
  }

  /**
   * Save the form; true when the dialog may close.
   */
  async save(): Promise<boolean> {
    return (await this._save?.()) ?? false;
  }

  getValue(): INotificationSettings | null {
    return this._saved;
  }

  protected render(): JSX.Element {
    return (
      <NotificationSettingsView
        {...this.options}
        bindSave={save => {
          this._save = save;
        }}
        onSaved={saved => {
          this._saved = saved;
          if (saved.webhook_secret) {
            this._onSecretShown();
          }
        }}
      />
    );
  }

  private _onSecretShown: () => void;
  private _save: (() => Promise<boolean>) | null = null;
  private _saved: INotificationSettings | null = null;
}

function NotificationSettingsView(
  props: INotificationSettingsOptions & {
    bindSave: (save: () => Promise<boolean>) => void;
    onSaved: (saved: INotificationSettings) => void;
  }
): JSX.Element {
  const { api, trans } = props;
  const mailOffered = featuresOf(props.config).notify_email;
  const [loaded, setLoaded] = React.useState(false);
  const [loadError, setLoadError] = React.useState<string | null>(null);
  const [email, setEmail] = React.useState(false);
  const [webhookUrl, setWebhookUrl] = React.useState('');
  const [events, setEvents] = React.useState<NotifyEvent[]>([...NOTIFY_EVENTS]);
  const [secretSet, setSecretSet] = React.useState(false);
  const [secret, setSecret] = React.useState<string | null>(null);
  const [copied, setCopied] = React.useState(false);
  const [busy, setBusy] = React.useState(false);
  const [error, setError] = React.useState<string | null>(null);
  const [fieldProblems, setFieldProblems] = React.useState<{
    [field in NotificationField]?: string;
  }>({});
  const [problems, setProblems] = React.useState<IFieldProblem[]>([]);

  React.useEffect(() => {
    let abandoned = false;
    api.getNotificationSettings().then(
      read => {
        if (abandoned) {
          return;
        }
        setEmail(read.default?.email ?? false);
        setWebhookUrl(read.default?.webhook_url ?? '');
        setEvents(read.default?.on ?? [...NOTIFY_EVENTS]);
        setSecretSet(read.webhook_secret_set ?? false);
        setLoaded(true);
      },
      reason => {
        if (!abandoned) {
          setLoadError(errorSentence(reason));
        }
      }
    );
    return () => {
      abandoned = true;
    };
  }, [api]);

  const put = async (rotate: boolean): Promise<boolean> => {
    if (secret !== null && !rotate) {
      return true; // the secret was shown: Done closes
    }
    if (!loaded) {
      setError(
        loadError ??
          trans.__(
            'Your settings are still being read; save again in a moment.'
          )
      );
      return false;
    }
    setBusy(true);
    setError(null);
    setFieldProblems({});
    setProblems([]);
    try {
      const url = webhookUrl.trim();
      const saved = await api.putNotificationSettings({
        default: {
          email: mailOffered && email,
          webhook_url: url === '' ? null : url,
          on: events
        },
        ...(rotate ? { rotate_secret: true } : {})
      });
      setSecretSet(saved.webhook_secret_set ?? false);
      props.onSaved(saved);
      if (saved.webhook_secret) {
        setSecret(saved.webhook_secret);
        setCopied(false);
        return false;
      }
      return true;
    } catch (reason) {
      const all = reason instanceof JobAPIError ? reason.problems : [];
      const { byField, rest } = problemsByField(all, notificationFieldOf);
      setFieldProblems(byField);
      setProblems(rest);
      setError(errorSentence(reason));
      return false;
    } finally {
      setBusy(false);
    }
  };
  const saveRef = React.useRef(put);
  saveRef.current = put;
  React.useEffect(() => props.bindSave(() => saveRef.current(false)), []);

  const copy = async (): Promise<void> => {
    if (secret === null) {
      return;
    }
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(secret);
    } else {
      Clipboard.copyToSystem(secret);
    }
    setCopied(true);
  };

  const eventLabels: { [event in NotifyEvent]: string } = {
    completed: trans.__('Finished'),
    failed: trans.__('Failed'),
    stopped: trans.__('Stopped')
  };
  const invalid = (field: NotificationField) =>
    fieldProblems[field]
      ? {
          'aria-invalid': true,
          'aria-describedby': `jp-JupyterToJob-notify-${field}-problem`
        }
      : {};
  const problemAt = (field: NotificationField) =>
    fieldProblems[field] ? (
      <span
        className="jp-JupyterToJob-fieldError"
        id={`jp-JupyterToJob-notify-${field}-problem`}
        data-testid={`notify-${field}-problem`}
      >
        {fieldProblems[field]}
      </span>
    ) : null;

  return (
    <div className="jp-JupyterToJob-form" data-testid="notification-settings">
      {!loaded && !loadError && (
        <Hint>{trans.__('Reading your notification settings…')}</Hint>
      )}
      <FormError
        testid="notification-settings-load-error"
        sentences={loadError ? [loadError] : []}
      />
      {loaded && secret === null && (
        <>
          <p className="jp-JupyterToJob-formNote">
            {trans.__(
              'Used by every job you run without its own notification choice.'
            )}
          </p>
          {mailOffered && (
            <Checkbox
              testid="notify-settings-email"
              checked={email}
              onChange={setEmail}
              inputProps={invalid('email')}
              label={trans.__('Mail me when a job ends')}
            />
          )}
          {problemAt('email')}
          <Field label={trans.__('Webhook URL (https)')}>
            <input
              type="url"
              className="jp-mod-styled jp-JupyterToJob-input"
              data-testid="notify-settings-webhook"
              placeholder={trans.__('https://…')}
              value={webhookUrl}
              onChange={event => setWebhookUrl(event.target.value)}
              {...invalid('webhook_url')}
            />
            {problemAt('webhook_url')}
          </Field>
          <FieldGroup
            className="jp-JupyterToJob-notifyEvents"
            testid="notify-settings-events"
            legend={trans.__('Tell me when a job has')}
          >
            {NOTIFY_EVENTS.map(event => (
              <label key={event} className="jp-JupyterToJob-checkbox">
                <input
                  type="checkbox"
                  data-testid={`notify-settings-on-${event}`}
                  checked={events.includes(event)}
                  onChange={change =>
                    setEvents(
                      NOTIFY_EVENTS.filter(item =>
                        item === event
                          ? change.target.checked
                          : events.includes(item)
                      )
                    )
                  }
                  {...invalid('on')}
                />
                {eventLabels[event]}
              </label>
            ))}
            {problemAt('on')}
          </FieldGroup>
          <div className="jp-JupyterToJob-notifySecret">
            <p className="jp-JupyterToJob-formNote" data-testid="secret-state">
              {secretSet
                ? trans.__(
                    'A webhook secret is set: your receiver checks each call’s signature with it.'
                  )
                : trans.__(
                    'No webhook secret yet: one is made when you save a webhook URL.'
                  )}
            </p>
            {secretSet && (
              <TextButton
                testid="notify-settings-rotate"
                disabled={busy}
                onClick={() => void put(true)}
              >
                {trans.__('Make a new webhook secret')}
              </TextButton>
            )}
          </div>
        </>
      )}
      {secret !== null && (
        <div
          className="jp-JupyterToJob-notifySecret"
          data-testid="webhook-secret-shown"
        >
          <p>
            {trans.__(
              'Your settings are saved. This is your new webhook secret: copy it now, it will not be shown again. The old secret, if any, no longer works.'
            )}
          </p>
          <div className="jp-JupyterToJob-secretRow">
            <input
              type="text"
              readOnly
              className="jp-mod-styled jp-JupyterToJob-input"
              data-testid="webhook-secret"
              aria-label={trans.__('Webhook secret')}
              value={secret}
              onFocus={event => event.target.select()}
            />
            <TextButton
              testid="webhook-secret-copy"
              onClick={() => void copy()}
            >
              {copied ? trans.__('Copied') : trans.__('Copy')}
            </TextButton>
          </div>
        </div>
      )}
      {busy && <Hint>{trans.__('Saving…')}</Hint>}
      <FormError
        testid="notification-settings-error"
        sentences={error ? [error] : []}
        problems={problems}
      />
    </div>
  );
}
