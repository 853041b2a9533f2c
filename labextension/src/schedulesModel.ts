import { VDomModel } from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';

import { JobsAPI } from './api';
import { errorSentence, unavailableSentence } from './errors';
import { ISchedule } from './scheduleModels';

/**
 * How the Schedules tab's model polls.
 */
export interface ISchedulesModelOptions {
  api: Pick<JobsAPI, 'listSchedules' | 'setScheduleStatus' | 'deleteSchedule'>;
  /**
   * Milliseconds between refreshes while the tab is shown (default 15000): a schedule
   * changes at its slots, not by the second.
   */
  refreshInterval?: number;
}

/**
 * The state of the Schedules tab: the user's schedules, the one to bring into view,
 * and the last action's sentence. It refreshes only while the tab is shown.
 */
export class SchedulesModel extends VDomModel {
  constructor(options: ISchedulesModelOptions) {
    super();
    this.api = options.api;
    this._poll = new Poll({
      factory: () => this.refresh(),
      frequency: {
        interval: options.refreshInterval ?? 15000,
        backoff: false
      },
      name: '@campus-gpu-hub/jupyter-to-job:schedules',
      standby: () => !this._visible
    });
  }

  readonly api: ISchedulesModelOptions['api'];

  /**
   * The user's schedules, newest first.
   */
  get schedules(): readonly ISchedule[] {
    return this._schedules;
  }

  get loaded(): boolean {
    return this._loaded;
  }

  /**
   * Why the list cannot be shown, as a sentence; null when the last refresh worked.
   */
  get message(): string | null {
    return this._message;
  }

  /**
   * The sentence of the last failed pause, resume or delete.
   */
  get actionError(): string | null {
    return this._actionError;
  }

  /**
   * The schedule an action is under way for, or null.
   */
  get busyId(): string | null {
    return this._busyId;
  }

  /**
   * The schedule to bring into view (just created, or named by a link).
   */
  get highlighted(): string | null {
    return this._highlighted;
  }

  get now(): Date {
    return this._now;
  }

  get visible(): boolean {
    return this._visible;
  }
  set visible(visible: boolean) {
    if (this._visible === visible) {
      return;
    }
    this._visible = visible;
    if (visible) {
      void this.refresh();
    }
  }

  /**
   * Fetch the schedules now.
   */
  refresh(): Promise<void> {
    if (!this._refreshing) {
      this._refreshing = this._refresh().finally(() => {
        this._refreshing = null;
      });
    }
    return this._refreshing;
  }

  /**
   * Refresh, then bring `scheduleId` into view.
   */
  async show(scheduleId: string): Promise<void> {
    this._highlighted = scheduleId;
    await this.refresh();
  }

  pause(schedule: ISchedule): Promise<void> {
    return this._act(schedule, async () => {
      this._replace(
        await this.api.setScheduleStatus(schedule.schedule_id, 'PAUSED')
      );
    });
  }

  resume(schedule: ISchedule): Promise<void> {
    return this._act(schedule, async () => {
      this._replace(
        await this.api.setScheduleStatus(schedule.schedule_id, 'ACTIVE')
      );
    });
  }

  /**
   * Delete a schedule (the jobs it started stay).
   */
  remove(schedule: ISchedule): Promise<void> {
    return this._act(schedule, async () => {
      await this.api.deleteSchedule(schedule.schedule_id);
      this._schedules = this._schedules.filter(
        item => item.schedule_id !== schedule.schedule_id
      );
    });
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    super.dispose();
  }

  private _replace(schedule: ISchedule): void {
    this._schedules = this._schedules.map(item =>
      item.schedule_id === schedule.schedule_id ? schedule : item
    );
  }

  private async _act(
    schedule: ISchedule,
    work: () => Promise<void>
  ): Promise<void> {
    if (this._busyId) {
      return;
    }
    this._busyId = schedule.schedule_id;
    this._actionError = null;
    this.stateChanged.emit();
    try {
      await work();
    } catch (reason) {
      this._actionError = errorSentence(reason);
    } finally {
      this._busyId = null;
      if (!this.isDisposed) {
        this.stateChanged.emit();
      }
    }
  }

  private async _refresh(): Promise<void> {
    try {
      this._schedules = await this.api.listSchedules();
      this._message = null;
    } catch (reason) {
      this._message = unavailableSentence(reason);
    }
    if (this.isDisposed) {
      return;
    }
    this._loaded = true;
    this._now = new Date();
    this.stateChanged.emit();
  }

  private _poll: Poll;
  private _schedules: ISchedule[] = [];
  private _loaded = false;
  private _message: string | null = null;
  private _actionError: string | null = null;
  private _busyId: string | null = null;
  private _highlighted: string | null = null;
  private _now = new Date();
  private _visible = false;
  private _refreshing: Promise<void> | null = null;
}
