/**
 * What a job's status allows and how its status and progress read in the Jobs panel.
 */
import { FINAL_STATUSES, IDescribeJob, JobStatus } from './models';

const LABELS: { [status in JobStatus]: string } = {
  CREATED: 'Created',
  QUEUED: 'Queued',
  RUNNING: 'Running',
  STOPPING: 'Stopping',
  COMPLETED: 'Completed',
  FAILED: 'Failed',
  STOPPED: 'Stopped'
};

/**
 * True once the job can change no more (COMPLETED, FAILED, STOPPED).
 */
export function isFinal(status: JobStatus): boolean {
  return FINAL_STATUSES.includes(status);
}

/**
 * True while a stop request means something: before the job starts or while it runs.
 */
export function canStop(status: JobStatus): boolean {
  return status === 'CREATED' || status === 'QUEUED' || status === 'RUNNING';
}

/**
 * True when the job may be deleted: only finished jobs (stop a running one first).
 */
export function canDelete(status: JobStatus): boolean {
  return isFinal(status);
}

/**
 * The status as a word for the badge: "Running", "Completed".
 */
export function statusLabel(status: JobStatus): string {
  return LABELS[status] ?? status;
}

/**
 * How far a job got through its code cells.
 */
export interface IJobProgress {
  /**
   * Code cells finished.
   */
  done: number;
  /**
   * Code cells to run; null while unknown (before the runner has read the notebook).
   */
  total: number | null;
  /**
   * `done / total` between 0 and 1; null while the total is unknown.
   */
  fraction: number | null;
  /**
   * "3 of 10 cells"; empty when there is nothing to say.
   */
  text: string;
}

/**
 * The progress of a job through its cells.
 */
export function jobProgress(
  job: Pick<IDescribeJob, 'cells_completed' | 'cells_total'>
): IJobProgress {
  const done = Math.max(0, job.cells_completed ?? 0);
  const total = job.cells_total ?? null;
  if (total === null) {
    return {
      done,
      total,
      fraction: null,
      text: done > 0 ? `${done} ${cells(done)} done` : ''
    };
  }
  if (total <= 0) {
    return { done, total: 0, fraction: 1, text: 'no code cells' };
  }
  return {
    done,
    total,
    fraction: Math.min(1, done / total),
    text: `${Math.min(done, total)} of ${total} ${cells(total)}`
  };
}

/**
 * Where a queued job stands: "next in queue", "2 jobs ahead".
 *
 * @param position 1 for the next job to start; null or less than 1 when unknown.
 */
export function queueText(position: number | null): string {
  if (position === null || position < 1) {
    return 'waiting in queue';
  }
  if (position === 1) {
    return 'next in queue';
  }
  const ahead = position - 1;
  return `${ahead} ${ahead === 1 ? 'job' : 'jobs'} ahead`;
}

/**
 * One line about where the job is: "Running cell 4 (3 of 10 cells)",
 * "Queued: next in queue", or the server's own status message when it has one.
 */
export function statusLine(
  job: Pick<
    IDescribeJob,
    | 'status'
    | 'status_message'
    | 'queue_position'
    | 'cells_completed'
    | 'cells_total'
    | 'current_cell'
  >
): string {
  switch (job.status) {
    case 'QUEUED':
      return [
        `Queued: ${queueText(job.queue_position)}.`,
        job.status_message ?? ''
      ]
        .join(' ')
        .trim();
    case 'RUNNING': {
      const progress = jobProgress(job).text;
      const cell =
        job.current_cell === null || job.current_cell === undefined
          ? 'Running'
          : `Running cell ${job.current_cell}`;
      return progress ? `${cell} (${progress}).` : `${cell}.`;
    }
    default:
      return job.status_message ?? `${statusLabel(job.status)}.`;
  }
}

function cells(count: number): string {
  return count === 1 ? 'cell' : 'cells';
}
