import { ServerConnection } from '@jupyterlab/services';
import { Popup, showPopup, TextItem } from '@jupyterlab/statusbar';
import {
  ReactWidget,
  VDomModel,
  VDomRenderer
} from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';
import * as React from 'react';

import { JobsAPI } from '../common/api';
import { CommandIDs } from '../common/commands';
import { JobAPIError } from '../common/errors';
import { isPressKey } from '../common/pressable';
import { sessionStatusText } from './countdown';
import { IServerSession } from '../common/models';
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
  constructor(model: SessionStatusModel, commands?: ICommandRunner) {
    super(model);
    this._commands = commands ?? null;
    this.addClass('jp-JupyterToJob-sessionStatus');
    this.addClass('jp-mod-highlight');
    this.node.dataset.testid = 'session-status';
    this.node.setAttribute('role', 'button');
    this.node.setAttribute('aria-haspopup', 'dialog');
    this.node.tabIndex = 0;
    this.node.addEventListener('click', () => this.toggleDetails());
    this.node.addEventListener('keydown', event => {
      if (isPressKey(event)) {
        event.preventDefault();
        this.toggleDetails();
      }
    });
  }

  /**
   * Open the details of the session under the item (closed again by a second click,
   * Escape or a click elsewhere).
   */
  toggleDetails(): void {
    if (this._popup && !this._popup.isDisposed) {
      this._popup.dispose();
      this._popup = null;
      return;
    }
    const session = this.model.session;
    if (session === null) {
      return;
    }
    const close = () => {
      this._popup?.dispose();
      this._popup = null;
    };
    const body = ReactWidget.create(
      <SessionDetails
        lines={sessionDetailLines(this.model)}
        commands={this._commands}
        onDone={close}
      />
    );
    body.addClass('jp-JupyterToJob-sessionDetails');
    this._popup = showPopup({ body, anchor: this, align: 'left' });
  }

  dispose(): void {
    this._popup?.dispose();
    super.dispose();
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

  private _commands: ICommandRunner | null;
  private _popup: Popup | null = null;
}

/**
 * What the item's details need of JupyterLab's commands.
 */
export interface ICommandRunner {
  hasCommand(id: string): boolean;
  execute(id: string, args?: Record<string, unknown>): Promise<unknown>;
}

/**
 * JupyterLab's own command for the hub's control panel (hub mode only).
 */
export const HUB_CONTROL_PANEL = 'hub:control-panel';

/**
 * The details' lines: the hub's reclaim warning first, then the profile, the share and
 * when the server stops (the item's tooltip, as sentences).
 */
export function sessionDetailLines(model: SessionStatusModel): string[] {
  const session = model.session;
  if (session === null) {
    return [];
  }
  const lines = sessionStatusText(session, model.now).title.split('\n');
  const reclaim = model.reclaim;
  return [reclaim ? reclaim.warning.message : '', ...lines].filter(Boolean);
}

/**
 * The session's details, and what the person can do from here: follow their jobs,
 * and (behind a hub) open the hub's control panel to stop or change the server.
 */
export function SessionDetails(props: {
  lines: string[];
  commands: ICommandRunner | null;
  onDone: () => void;
}): JSX.Element {
  const { commands, onDone } = props;
  const run = (id: string) => () => {
    onDone();
    void commands?.execute(id);
  };
  return (
    <div
      className="jp-JupyterToJob-sessionDetailsBody"
      role="dialog"
      aria-label="Your server's GPU share"
    >
      <h3 className="jp-JupyterToJob-sessionDetailsTitle">
        Your server&apos;s GPU share
      </h3>
      {props.lines.map(line => (
        <p key={line}>{line}</p>
      ))}
      <div className="jp-JupyterToJob-sessionDetailsActions">
        {commands?.hasCommand(CommandIDs.openJobsPanel) ? (
          <button
            type="button"
            className="jp-Button jp-mod-styled jp-mod-reject"
            onClick={run(CommandIDs.openJobsPanel)}
          >
            Open Jobs panel
          </button>
        ) : null}
        {commands?.hasCommand(HUB_CONTROL_PANEL) ? (
          <button
            type="button"
            className="jp-Button jp-mod-styled jp-mod-reject"
            onClick={run(HUB_CONTROL_PANEL)}
          >
            Hub control panel
          </button>
        ) : null}
      </div>
    </div>
  );
}

/**
 * The status bar item and its model, reading `api/session` of this server.
 */
export function createSessionStatus(
  serverSettings: ServerConnection.ISettings,
  commands?: ICommandRunner
): { item: SessionStatus; model: SessionStatusModel } {
  const model = new SessionStatusModel({ api: new JobsAPI(serverSettings) });
  return { item: new SessionStatus(model, commands), model };
}
