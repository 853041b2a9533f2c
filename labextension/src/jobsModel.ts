import { VDomModel } from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';

import { JobsAPI } from './api';
import { errorSentence, isTransient, unavailableSentence } from './errors';
import {
  DEFAULT_SORT,
  filterJobs,
  hasUnfinishedJobs,
  IJobFilter,
  IJobSort,
  NO_FILTER,
  sortJobs,
  upsertJob
} from './jobList';
import { isFinal } from './jobStatus';
import { LogFollower } from './logFollower';
import { ICreateJob, IDescribeJob } from './models';

/**
 * How the Jobs panel's model polls and what it keeps.
 */
export interface IJobsModelOptions {
  api: JobsAPI;
  /**
   * Milliseconds between refreshes while a job is unfinished (default 2000).
   */
  refreshInterval?: number;
  /**
   * Milliseconds between reads of the selected job's log while it grows (default
   * 500): a job printing thousands of lines a second shows them as they come.
   */
  logInterval?: number;
  /**
   * Characters of log kept in the page while following (default 32 Mi).
   */
  logWindow?: number;
}

/**
 * The state of the Jobs panel: the user's jobs, the filter and order, the selected
 * job and its log. It refreshes every `refreshInterval` while the panel is visible
 * and some job (or the selected job's log) can still change, and not otherwise.
 */
export class JobsModel extends VDomModel {
  constructor(options: IJobsModelOptions) {
    super();
    this.api = options.api;
    this._logWindow = options.logWindow;
    this._poll = new Poll({
      factory: () => this.refresh(),
      frequency: {
        interval: options.refreshInterval ?? 2000,
        backoff: false
      },
      name: '@campus-gpu-hub/jupyter-to-job:jobs',
      standby: () => !this._visible || !this._needsPolling()
    });
    this._logPoll = new Poll({
      factory: () => this._followLog(),
      frequency: { interval: options.logInterval ?? 500, backoff: false },
      name: '@campus-gpu-hub/jupyter-to-job:job-log',
      standby: () =>
        !this._visible ||
        this._follower === null ||
        this._follower.complete ||
        this._logError !== null
    });
  }

  /**
   * The job API client.
   */
  readonly api: JobsAPI;

  /**
   * Every job fetched, newest first.
   */
  get jobs(): readonly IDescribeJob[] {
    return this._jobs;
  }

  /**
   * The jobs to list: filtered and sorted as the user asked.
   */
  get visibleJobs(): IDescribeJob[] {
    return sortJobs(filterJobs(this._jobs, this._filter), this._sort);
  }

  /**
   * The user's jobs on the server (the list holds at most the 500 newest).
   */
  get totalCount(): number {
    return this._total;
  }

  get filter(): IJobFilter {
    return this._filter;
  }

  get sort(): IJobSort {
    return this._sort;
  }

  /**
   * False until the first refresh has answered.
   */
  get loaded(): boolean {
    return this._loaded;
  }

  /**
   * Why the list cannot be shown (server extension missing, hub service down), as
   * the sentence to show; null when the last refresh worked.
   */
  get message(): string | null {
    return this._message;
  }

  /**
   * The selected job, as last refreshed.
   */
  get selected(): IDescribeJob | null {
    return this._selected;
  }

  /**
   * The selected job's log follower.
   */
  get log(): LogFollower | null {
    return this._follower;
  }

  /**
   * Why the log could not be read the last time; null when it could.
   */
  get logError(): string | null {
    return this._logError;
  }

  /**
   * The sentence of the last failed action (stop, delete, rerun, open, download).
   */
  get actionError(): string | null {
    return this._actionError;
  }

  /**
   * The action running now ("stop", "delete"...), or null.
   */
  get busyAction(): string | null {
    return this._busyAction;
  }

  /**
   * The time the list was last refreshed (for the elapsed time of running jobs).
   */
  get now(): Date {
    return this._now;
  }

  /**
   * Whether the panel is shown: the model polls only then.
   */
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
   * Fetch the user's jobs now, and read on in the selected job's log.
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
   * Show only some jobs.
   */
  setFilter(filter: Partial<IJobFilter>): void {
    this._filter = { ...this._filter, ...filter };
    this.stateChanged.emit();
  }

  /**
   * List the jobs in another order.
   */
  setSort(sort: IJobSort): void {
    this._sort = sort;
    this.stateChanged.emit();
  }

  /**
   * Select a job (null: none) and start following its log.
   */
  select(jobId: string | null): void {
    if (jobId === (this._selected?.job_id ?? null)) {
      return;
    }
    this._selected =
      jobId === null
        ? null
        : (this._jobs.find(job => job.job_id === jobId) ?? null);
    this._actionError = null;
    this._logError = null;
    this._follower = this._selected ? this._newFollower(this._selected) : null;
    this.stateChanged.emit();
    void this._followLog().then(() => this._fillEarlierLog());
  }

  /**
   * Refresh, then select `jobId` (fetching it when the list does not hold it).
   */
  async showJob(jobId: string): Promise<void> {
    await this.refresh();
    if (!this._jobs.some(job => job.job_id === jobId)) {
      try {
        this._jobs = upsertJob(this._jobs, await this.api.getJob(jobId));
      } catch (reason) {
        this._actionError = errorSentence(reason);
        this.stateChanged.emit();
        return;
      }
    }
    this.select(jobId);
    this._poll.refresh();
  }

  /**
   * Read the part of the selected job's log before what is shown.
   */
  async loadEarlierLog(): Promise<void> {
    const follower = this._follower;
    if (!follower) {
      return;
    }
    try {
      await follower.loadEarlier();
      this._logError = null;
    } catch (reason) {
      this._logError = errorSentence(reason);
    }
    if (follower === this._follower) {
      this.stateChanged.emit();
    }
  }

  /**
   * Stop a job (queued: at once; running: after its current cell).
   */
  stop(job: IDescribeJob): Promise<void> {
    return this._act('stop', async () => {
      await this.api.stopJob(job.job_id);
      await this.refresh();
    });
  }

  /**
   * Delete a finished job with its outputs and log.
   */
  remove(job: IDescribeJob): Promise<void> {
    return this._act('delete', async () => {
      await this.api.deleteJob(job.job_id);
      this._jobs = this._jobs.filter(item => item.job_id !== job.job_id);
      if (this._selected?.job_id === job.job_id) {
        this.select(null);
      }
      await this.refresh();
    });
  }

  /**
   * Create a job from `request` and select it (Rerun).
   */
  createAndSelect(request: ICreateJob): Promise<void> {
    return this._act('rerun', async () => {
      const job = await this.api.createJob(request);
      this._jobs = upsertJob(this._jobs, job);
      this.select(job.job_id);
      this._poll.refresh();
    });
  }

  /**
   * Run another action of the panel (open, download) with the busy state and the
   * error sentence handled as for the built-in ones.
   */
  run(action: string, work: () => Promise<void>): Promise<void> {
    return this._act(action, work);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    this._logPoll.dispose();
    this._follower = null;
    super.dispose();
  }

  private async _act(action: string, work: () => Promise<void>) {
    if (this._busyAction) {
      return;
    }
    this._busyAction = action;
    this._actionError = null;
    this.stateChanged.emit();
    try {
      await work();
    } catch (reason) {
      this._actionError = errorSentence(reason);
    } finally {
      this._busyAction = null;
      if (!this.isDisposed) {
        this.stateChanged.emit();
      }
    }
  }

  private async _refresh(): Promise<void> {
    try {
      const answer = await this.api.listRecentJobs();
      this._jobs = answer.jobs;
      this._total = answer.total_count;
      this._message = null;
      this._transient = false;
    } catch (reason) {
      this._message = unavailableSentence(reason);
      this._transient = isTransient(reason);
    }
    if (this.isDisposed) {
      return;
    }
    this._loaded = true;
    this._now = new Date();
    if (this._selected) {
      const id = this._selected.job_id;
      this._selected =
        this._jobs.find(job => job.job_id === id) ?? this._selected;
    }
    this.stateChanged.emit();
    await this._followLog();
  }

  private async _followLog(): Promise<void> {
    const follower = this._follower;
    if (!follower || follower.complete) {
      return;
    }
    let changed = false;
    try {
      changed = await follower.poll();
      changed = changed || this._logError !== null;
      this._logError = null;
    } catch (reason) {
      this._logError = errorSentence(reason);
      changed = true;
    }
    if (changed && follower === this._follower && !this.isDisposed) {
      this.stateChanged.emit();
    }
  }

  /**
   * Read the selected log's earlier part, a piece at a time with a redraw after
   * each, while it fits the window: search and "jump to first error" then see the
   * whole log, and the page never waits on all of it at once.
   */
  private async _fillEarlierLog(): Promise<void> {
    const follower = this._follower;
    while (
      follower !== null &&
      follower === this._follower &&
      !this.isDisposed &&
      follower.fillsEarlier
    ) {
      try {
        if (!(await follower.fillEarlier())) {
          return;
        }
      } catch (reason) {
        this._logError = errorSentence(reason);
        return;
      } finally {
        if (follower === this._follower && !this.isDisposed) {
          this.stateChanged.emit();
        }
      }
    }
  }

  private _newFollower(job: IDescribeJob): LogFollower {
    return new LogFollower(
      (offset, limit) => this.api.getLog(job.job_id, offset, limit),
      { window: this._logWindow, knownSize: job.log_size }
    );
  }

  private _needsPolling(): boolean {
    if (this._transient || hasUnfinishedJobs(this._jobs)) {
      return true;
    }
    // A finished job's log is read to its end, then the follower is complete. A
    // log that cannot be read for a finished job is not retried on a timer.
    const follower = this._follower;
    const selected = this._selected;
    return (
      follower !== null &&
      !follower.complete &&
      !(
        this._logError !== null &&
        selected !== null &&
        isFinal(selected.status)
      )
    );
  }

  private _poll: Poll;
  private _logPoll: Poll;
  private _jobs: IDescribeJob[] = [];
  private _total = 0;
  private _filter: IJobFilter = NO_FILTER;
  private _sort: IJobSort = DEFAULT_SORT;
  private _loaded = false;
  private _message: string | null = null;
  private _transient = false;
  private _selected: IDescribeJob | null = null;
  private _follower: LogFollower | null = null;
  private _logError: string | null = null;
  private _actionError: string | null = null;
  private _busyAction: string | null = null;
  private _now = new Date();
  private _visible = false;
  private _refreshing: Promise<void> | null = null;
  private _logWindow: number | undefined;
}
