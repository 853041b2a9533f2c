import { Poll } from '@lumino/polling';

import { JobsAPI } from '../common/api';
import { errorSentence } from '../common/errors';
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
import { withLogProgress } from './logProgress';
import { ICreateJob, IDescribeJob } from '../common/models';
import { PollingModel } from '../common/pollingModel';

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
export class JobsModel extends PollingModel {
  constructor(options: IJobsModelOptions) {
    super({
      name: '@campus-gpu-hub/jupyter-to-job:jobs',
      interval: options.refreshInterval ?? 2000
    });
    this.api = options.api;
    this._logWindow = options.logWindow;
    this._logPoll = new Poll({
      factory: () => this._followLog(),
      frequency: { interval: options.logInterval ?? 500, backoff: false },
      name: '@campus-gpu-hub/jupyter-to-job:job-log',
      standby: () =>
        !this.visible ||
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
   * Every job fetched, newest first; the selected one as far on as its log tells.
   */
  get jobs(): readonly IDescribeJob[] {
    const id = this._selected?.job_id;
    return this._jobs.map(job =>
      job.job_id === id ? this._withLog(job) : job
    );
  }

  /**
   * The jobs to list: filtered and sorted as the user asked.
   */
  get visibleJobs(): IDescribeJob[] {
    return sortJobs(filterJobs(this.jobs, this._filter), this._sort);
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
   * The selected job, as last refreshed.
   */
  get selected(): IDescribeJob | null {
    return this._selected && this._withLog(this._selected);
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
   * The action running now ("stop", "delete"...), or null.
   */
  get busyAction(): string | null {
    return this.busy;
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
    this.setActionError(null);
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
        this.setActionError(errorSentence(reason));
        this.stateChanged.emit();
        return;
      }
    }
    this.select(jobId);
    this.poll.refresh();
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
    return this.act('stop', async () => {
      await this.api.stopJob(job.job_id);
      await this.refresh();
    });
  }

  /**
   * Delete a finished job with its outputs and log.
   */
  remove(job: IDescribeJob): Promise<void> {
    return this.act('delete', async () => {
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
    return this.act('rerun', async () => {
      const job = await this.api.createJob(request);
      this._jobs = upsertJob(this._jobs, job);
      this.select(job.job_id);
      this.poll.refresh();
    });
  }

  /**
   * Run another action of the panel (open, download) with the busy state and the
   * error sentence handled as for the built-in ones.
   */
  run(action: string, work: () => Promise<void>): Promise<void> {
    return this.act(action, work);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._logPoll.dispose();
    this._follower = null;
    super.dispose();
  }

  /**
   * Fetch the user's jobs, keeping the selected one as last answered.
   */
  protected async fetch(): Promise<void> {
    const answer = await this.api.listRecentJobs();
    this._jobs = answer.jobs;
    this._total = answer.total_count;
    if (this._selected) {
      const id = this._selected.job_id;
      this._selected =
        this._jobs.find(job => job.job_id === id) ?? this._selected;
    }
  }

  /**
   * After the list is redrawn, read on in the selected job's log.
   */
  protected afterRefresh(): Promise<void> {
    return this._followLog();
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

  /**
   * The selected job with its log's progress where the log is further on: the
   * cell count and status move with the log lines the panel shows.
   */
  private _withLog(job: IDescribeJob): IDescribeJob {
    return withLogProgress(job, this._follower?.progress.progress ?? null);
  }

  private _newFollower(job: IDescribeJob): LogFollower {
    return new LogFollower(
      (offset, limit) => this.api.getLog(job.job_id, offset, limit),
      { window: this._logWindow, knownSize: job.log_size }
    );
  }

  protected keepsPolling(): boolean {
    if (this.transient || hasUnfinishedJobs(this._jobs)) {
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

  private _logPoll: Poll;
  private _jobs: IDescribeJob[] = [];
  private _total = 0;
  private _filter: IJobFilter = NO_FILTER;
  private _sort: IJobSort = DEFAULT_SORT;
  private _selected: IDescribeJob | null = null;
  private _follower: LogFollower | null = null;
  private _logError: string | null = null;
  private _logWindow: number | undefined;
}
