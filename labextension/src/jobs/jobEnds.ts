/**
 * Telling the user when one of their jobs ends while JupyterLab is open: which jobs
 * just ended (from one listing to the next), and a watcher that lists the user's jobs
 * in the background and hands each ended job to a notifier once.
 */
import { Notification } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { nullTranslator, TranslationBundle } from '@jupyterlab/translation';
import { Poll } from '@lumino/polling';

import { JobsAPI } from '../common/api';
import { formatElapsed, parseTime } from '../common/format';
import { isFinal } from './jobStatus';
import { IDescribeJob, IListJobsResponse, JobStatus } from '../common/models';

/**
 * How a job ended, for the notification: completed is a success, failed an error.
 */
export type JobEnd = 'success' | 'error';

/**
 * The statuses a notification is shown for (a stop is the user's own doing).
 */
const NOTIFIED: { [status in JobStatus]?: JobEnd } = {
  COMPLETED: 'success',
  FAILED: 'error'
};

/**
 * Remembers the status of each of the user's jobs between listings and says which
 * ended in between. The first listing only sets what was known when the lab opened:
 * jobs finished before that are never announced.
 */
export class JobEndTracker {
  /**
   * @param openedAt When the lab opened: a job first seen already finished is
   * announced only when it ended after this (it ran and ended between two listings).
   */
  constructor(openedAt: Date = new Date()) {
    this._openedAt = openedAt.getTime();
  }

  /**
   * True while one of the user's own jobs is known to be unfinished.
   */
  get watching(): boolean {
    for (const status of this._known.values()) {
      if (!isFinal(status)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Take a new listing; return the user's own jobs that completed or failed since the
   * last one (each job once).
   */
  observe(jobs: readonly IDescribeJob[]): IDescribeJob[] {
    const first = !this._started;
    this._started = true;
    const ended: IDescribeJob[] = [];
    for (const job of jobs) {
      if (!job.own) {
        continue; // students' jobs an instructor reads are not theirs to be told of
      }
      const before = this._known.get(job.job_id);
      this._known.set(job.job_id, job.status);
      if (first || !isFinal(job.status) || !NOTIFIED[job.status]) {
        continue;
      }
      const endedAt = parseTime(job.end_time)?.getTime() ?? 0;
      if (before === undefined ? endedAt >= this._openedAt : !isFinal(before)) {
        ended.push(job);
      }
    }
    return ended;
  }

  private _known = new Map<string, JobStatus>();
  private _started = false;
  private _openedAt: number;
}

/**
 * The sentence of a job-end notification (at most about 140 characters show).
 */
export function jobEndMessage(job: IDescribeJob): string {
  const name = job.name.length > 40 ? `${job.name.slice(0, 39)}…` : job.name;
  if (job.status === 'COMPLETED') {
    return `Job “${name}” completed in ${formatElapsed(job)}.`;
  }
  const why = job.status_message ?? '';
  const short = why.length > 90 ? `${why.slice(0, 89)}…` : why;
  return `Job “${name}” failed. ${short}`.trim();
}

/**
 * What the watcher needs.
 */
export interface IJobEndWatcherOptions {
  api: { listRecentJobs(maxPages?: number): Promise<IListJobsResponse> };
  /**
   * Shows one ended job (a JupyterLab notification with "Show job").
   */
  notify: (job: IDescribeJob, end: JobEnd) => void;
  /**
   * Milliseconds between listings while one of the user's jobs runs (default 5000).
   */
  interval?: number;
  /**
   * Milliseconds between listings while none runs, to find new ones (default 60000).
   */
  idleInterval?: number;
  openedAt?: Date;
}

/**
 * Lists the user's jobs in the background and notifies each job that ends: often
 * while one of theirs is unfinished, seldom otherwise; `refresh()` after a submit.
 */
export class JobEndWatcher {
  constructor(options: IJobEndWatcherOptions) {
    this._options = options;
    this._tracker = new JobEndTracker(options.openedAt);
    const interval = options.interval ?? 5000;
    const idle = options.idleInterval ?? 60000;
    this._poll = new Poll({
      // The frequency is fixed; while no job of the user's runs, the ticks in
      // between idle listings stand by.
      factory: () => this._check(),
      frequency: { interval, backoff: false },
      name: '@campus-gpu-hub/jupyter-to-job:job-ends',
      standby: () => {
        if (this._tracker.watching) {
          return false;
        }
        return Date.now() - this._lastCheck < idle;
      }
    });
  }

  /**
   * List the jobs now (after a job was submitted: it is then watched closely).
   */
  refresh(): Promise<void> {
    return this._check();
  }

  dispose(): void {
    this._poll.dispose();
  }

  private async _check(): Promise<void> {
    this._lastCheck = Date.now();
    let jobs: readonly IDescribeJob[];
    try {
      jobs = (await this._options.api.listRecentJobs(1)).jobs;
    } catch {
      return; // the Jobs panel says why the service cannot be used
    }
    for (const job of this._tracker.observe(jobs)) {
      this._options.notify(job, NOTIFIED[job.status] ?? 'success');
    }
  }

  private _options: IJobEndWatcherOptions;
  private _tracker: JobEndTracker;
  private _poll: Poll;
  private _lastCheck = 0;
}

/**
 * Show a job's end as a JupyterLab notification: a success that closes by itself
 * when it completed, an error that stays when it failed, each with "Show job".
 *
 * @returns The notification's id.
 */
export function notifyJobEnd(
  job: IDescribeJob,
  end: JobEnd,
  showJob: (jobId: string) => void,
  notification: Pick<typeof Notification, 'success' | 'error'> = Notification,
  trans: TranslationBundle = nullTranslator.load('jupyter_to_job')
): string {
  const options = {
    autoClose: end === 'success' ? 10000 : (false as const),
    actions: [
      {
        label: trans.__('Show job'),
        caption: trans.__('Open the Jobs panel at this job'),
        callback: () => showJob(job.job_id)
      }
    ]
  };
  const message = jobEndMessage(job);
  return end === 'success'
    ? notification.success(message, options)
    : notification.error(message, options);
}

/**
 * The watcher of the lab: the user's jobs through this server, a notification for
 * each that ends, and "Show job" opening the Jobs panel at it.
 */
export function createJobEndWatcher(
  serverSettings: ServerConnection.ISettings,
  showJob: (jobId: string) => void,
  trans?: TranslationBundle
): JobEndWatcher {
  return new JobEndWatcher({
    api: new JobsAPI(serverSettings),
    notify: (job, end) => notifyJobEnd(job, end, showJob, Notification, trans)
  });
}
