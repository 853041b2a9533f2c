/**
 * The lab's side of reclaim: it polls this server's reclaim warning, shows it as a
 * JupyterLab notification (with "I'm still using it" when the hub allows keeping the
 * server once), feeds the status bar's countdown, and saves open, modified documents
 * just before the server stops.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { JobsAPI } from '../common/api';
import { JobAPIError } from '../common/errors';
import {
  IReadWarning,
  IReclaimWarning,
  notificationText,
  timeToSave,
  warningKey
} from './reclaim';

/**
 * A document the lab can save: JupyterLab's document widgets have a context.
 */
export interface ISavableDocument {
  context: { model: { dirty: boolean }; save(): Promise<void>; path: string };
}

/**
 * What the watcher needs from the application.
 */
export interface IReclaimWatcherOptions {
  api: JobsAPI;
  /**
   * The open documents (the shell's main-area document widgets).
   */
  documents: () => Iterable<ISavableDocument>;
  /**
   * Milliseconds between reads of `api/reclaim` (default 30 s).
   */
  refreshInterval?: number;
  /**
   * Milliseconds between checks of whether to save (default 10 s).
   */
  tickInterval?: number;
  /**
   * The notification API (JupyterLab's `Notification`; swapped in tests).
   */
  notify?: Pick<
    typeof Notification,
    'warning' | 'dismiss' | 'success' | 'error'
  >;
}

export const KEEP_LABEL = "I'm still using it";

/**
 * Polls the warning and tells the user; `changed` fires when the warning changes.
 */
export class ReclaimWatcher {
  constructor(options: IReclaimWatcherOptions) {
    this._api = options.api;
    this._documents = options.documents;
    this._notify = options.notify ?? Notification;
    this._poll = new Poll({
      factory: () => this.refresh(),
      frequency: { interval: options.refreshInterval ?? 30 * 1000 },
      name: '@campus-gpu-hub/jupyter-to-job:reclaim'
    });
    this._tick = new Poll({
      factory: () => this.saveIfDue(new Date()),
      frequency: { interval: options.tickInterval ?? 10 * 1000 },
      name: '@campus-gpu-hub/jupyter-to-job:reclaim-save',
      standby: () => this._read === null
    });
  }

  /**
   * The warning as last read, or null.
   */
  get current(): IReadWarning | null {
    return this._read;
  }

  get changed(): ISignal<this, IReadWarning | null> {
    return this._changed;
  }

  /**
   * Read the warning now and show what is new. A server without the end point (404)
   * or a service that does not answer keeps the last answer.
   */
  async refresh(): Promise<void> {
    let warning: IReclaimWarning | null;
    try {
      warning = (await this._api.getReclaimWarning()).warning;
    } catch (error) {
      if (error instanceof JobAPIError && error.status === 404) {
        this._poll.dispose();
      }
      return;
    }
    this._show(warning, new Date());
  }

  /**
   * Save every open, modified document once the stop is under a minute away (once
   * per warning). Documents that cannot be saved are left as they are.
   */
  async saveIfDue(now: Date): Promise<string[]> {
    const read = this._read;
    if (read === null || !timeToSave(read, now)) {
      return [];
    }
    const key = warningKey(read.warning);
    if (this._savedFor === key) {
      return [];
    }
    this._savedFor = key;
    const saved: string[] = [];
    for (const document of this._documents()) {
      if (!document.context.model.dirty) {
        continue;
      }
      try {
        await document.context.save();
        saved.push(document.context.path);
      } catch {
        // A read-only or deleted file: nothing more to do before the stop.
      }
    }
    return saved;
  }

  /**
   * "I'm still using it": the server asks the hub; the hub decides.
   */
  async keep(): Promise<void> {
    try {
      const answer = await this._api.keepServer();
      this._show(answer.warning, new Date());
      this._notify.success(answer.message || 'Your server keeps running.', {
        autoClose: 5000
      });
    } catch (error) {
      const message =
        error instanceof Error ? error.message : 'The hub did not answer.';
      this._notify.error(message, { autoClose: false });
    }
  }

  dispose(): void {
    this._poll.dispose();
    this._tick.dispose();
    this._dismiss();
  }

  private _show(warning: IReclaimWarning | null, fetchedAt: Date): void {
    const key = warning ? warningKey(warning) : null;
    const shownKey = this._read ? warningKey(this._read.warning) : null;
    this._read = warning ? { warning, fetchedAt } : null;
    if (key !== shownKey) {
      this._dismiss();
      if (warning) {
        this._notificationId = this._notify.warning(notificationText(warning), {
          autoClose: false,
          actions: warning.can_keep
            ? [
                {
                  label: KEEP_LABEL,
                  caption: 'Keep this server running; this works once.',
                  displayType: 'accent',
                  callback: () => void this.keep()
                }
              ]
            : []
        });
      }
    }
    this._changed.emit(this._read);
  }

  private _dismiss(): void {
    if (this._notificationId !== null) {
      this._notify.dismiss(this._notificationId);
      this._notificationId = null;
    }
  }

  private _api: JobsAPI;
  private _documents: () => Iterable<ISavableDocument>;
  private _notify: NonNullable<IReclaimWatcherOptions['notify']>;
  private _poll: Poll;
  private _tick: Poll;
  private _read: IReadWarning | null = null;
  private _savedFor: string | null = null;
  private _notificationId: string | null = null;
  private _changed = new Signal<this, IReadWarning | null>(this);
}

/**
 * The open documents of the lab's main area (widgets with a document context).
 */
export function* openDocuments(
  shell: JupyterFrontEnd.IShell
): IterableIterator<ISavableDocument> {
  for (const widget of shell.widgets('main')) {
    const context = (widget as Partial<ISavableDocument>).context;
    if (context && typeof context.save === 'function' && context.model) {
      yield widget as unknown as ISavableDocument;
    }
  }
}

/**
 * The watcher of this lab's server, started.
 */
export function createReclaimWatcher(app: JupyterFrontEnd): ReclaimWatcher {
  return new ReclaimWatcher({
    api: new JobsAPI(app.serviceManager.serverSettings),
    documents: () => openDocuments(app.shell)
  });
}
