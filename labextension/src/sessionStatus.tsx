import { ServerConnection } from '@jupyterlab/services';
import { TextItem } from '@jupyterlab/statusbar';
import { VDomModel, VDomRenderer } from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';
import * as React from 'react';

import { JobsAPI } from './api';
import { JobAPIError } from './errors';
import { sessionStatusText } from './countdown';
import { IServerSession } from './models';
import { IReadWarning, reclaimCountdown } from './reclaim';

/**
 * How often the session is read and the countdown recomputed.
 */
export interface ISessionStatusOptions {
  api: JobsAPI;
  /**
   * Milliseconds between reads of `api/session` (default 30 s).
   */
  refreshInterval?: number;
  /**
   * Milliseconds between recomputations of the countdown (default 15 s).
   */
  tickInterval?: number;
}

/**
 * The session as last read, and the current time for the countdown.
 */
export class SessionStatusModel extends VDomModel {
  constructor(options: ISessionStatusOptions) {
    super();
    this._api = options.api;
    this._fetch = new Poll({
      factory: () => this.refresh(),
      frequency: { interval: options.refreshInterval ?? 30 * 1000 },
      name: '@campus-gpu-hub/jupyter-to-job:session',
      standby: 'when-hidden'
    });
    this._tick = new Poll({
      factory: async () => {
        this._now = new Date();
        this.stateChanged.emit();
      },
      frequency: { interval: options.tickInterval ?? 15 * 1000 },
      name: '@campus-gpu-hub/jupyter-to-job:countdown',
      standby: () =>
        (this._session === null && this._reclaim === null) || 'when-hidden'
    });
  }

  /**
   * The session, or null until read (or when the server has no session end point).
   */
  get session(): IServerSession | null {
    return this._session;
  }

  get now(): Date {
    return this._now;
  }

  /**
   * The hub's warning that it will stop this server, or null.
   */
  get reclaim(): IReadWarning | null {
    return this._reclaim;
  }

  set reclaim(value: IReadWarning | null) {
    this._reclaim = value;
    this._now = new Date();
    this.stateChanged.emit();
  }

  /**
   * Read the session now. A server without the end point (404) hides the item;
   * other errors keep the last answer.
   */
  async refresh(): Promise<void> {
    try {
      this._session = await this._api.getSession();
    } catch (error) {
      if (error instanceof JobAPIError && error.status === 404) {
        this._session = null;
      }
    }
    this._now = new Date();
    if (!this.isDisposed) {
      this.stateChanged.emit();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._fetch.dispose();
    this._tick.dispose();
    super.dispose();
  }

  private _api: JobsAPI;
  private _session: IServerSession | null = null;
  private _reclaim: IReadWarning | null = null;
  private _now = new Date();
  private _fetch: Poll;
  private _tick: Poll;
}

/**
 * The status bar item: "GPU: 1/4 of an RTX 4090, 6 GiB · class ends in 42 min",
 * in a warning style in the last minutes of the session.
 */
export class SessionStatus extends VDomRenderer<SessionStatusModel> {
  constructor(model: SessionStatusModel) {
    super(model);
    this.addClass('jp-JupyterToJob-sessionStatus');
    this.node.dataset.testid = 'session-status';
  }

  protected render(): JSX.Element | null {
    const session = this.model.session;
    if (session === null) {
      return null;
    }
    const text = sessionStatusText(session, this.model.now);
    const reclaim = this.model.reclaim;
    // The hub's reclaim warning comes before the class countdown: it is sooner or it
    // would not be shown.
    const countdown = reclaim
      ? reclaimCountdown(reclaim, this.model.now)
      : text.countdown;
    const warning = countdown?.warning ?? false;
    this.toggleClass('jp-JupyterToJob-statusWarning', warning);
    this.node.title = reclaim
      ? `${reclaim.warning.message}\n${text.title}`
      : text.title;
    const source = countdown ? `${text.gpu} · ${countdown.text}` : text.gpu;
    return <TextItem source={source} />;
  }
}

/**
 * The status bar item and its model, reading `api/session` of this server.
 */
export function createSessionStatus(
  serverSettings: ServerConnection.ISettings
): { item: SessionStatus; model: SessionStatusModel } {
  const model = new SessionStatusModel({ api: new JobsAPI(serverSettings) });
  return { item: new SessionStatus(model), model };
}
