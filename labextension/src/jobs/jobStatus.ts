/**
 * What a job's status allows and how its status and progress read in the Jobs panel.
 */
import { FINAL_STATUSES, IDescribeJob, JobStatus } from '../common/models';

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
 * The buttons of a job's detail the viewer may use: the service says what this
 * viewer may do with the job (an instructor reads a student's job, nothing more),
 * its status what makes sense now, and the back end's features what it supports.
 */
export interface IJobActionsShown {
  stop: boolean;
  delete: boolean;
  rerun: boolean;
}

export function actionsShown(
  job: Pick<IDescribeJob, 'status' | 'can_stop' | 'can_delete' | 'can_rerun'>,
  features: { stop: boolean; delete: boolean }
): IJobActionsShown {
  return {
    stop: features.stop && job.can_stop && canStop(job.status),
    delete: features.delete && job.can_delete && canDelete(job.status),
    rerun: job.can_rerun
  };
}

/**
 * True when the list holds a job that is not the viewer's: it then names owners.
 */
export function showsOwners(
  jobs: readonly Pick<IDescribeJob, 'own'>[]
): boolean {
  return jobs.some(job => !job.own);
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
 * One line about where the job is: "Running cell 4 of 10." (the user's code cells,
 * counted from 1 as the log does; papermill's parameters cell is not one of them),
 * "Setting parameters.", "Queued: next in queue", or the server's own status message.
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
  > &
    Partial<Pick<IDescribeJob, 'parameters'>>
): string {
  switch (job.status) {
    case 'QUEUED':
      return [
        `Queued: ${queueText(job.queue_position)}.`,
        job.status_message ?? ''
      ]
        .join(' ')
        .trim();
    case 'RUNNING':
      return `${runningText(job)}.`;
    default:
      return job.status_message ?? `${statusLabel(job.status)}.`;
  }
}

/**
 * What a running job does now: "Running cell 4 of 10", "Setting parameters",
 * "Starting the kernel".
 */
export function runningText(
  job: Pick<IDescribeJob, 'cells_completed' | 'cells_total' | 'current_cell'> &
    Partial<Pick<IDescribeJob, 'parameters'>>
): string {
  const done = Math.max(0, job.cells_completed ?? 0);
  const total = job.cells_total ?? null;
  const hasParameters = Object.keys(job.parameters ?? {}).length > 0;
  if (job.current_cell === null || job.current_cell === undefined) {
    // Between the kernel's start and the first cell, or in the parameters cell
    // (which the runner reports as no cell of the user's).
    if (done === 0) {
      return hasParameters
        ? 'Starting the kernel and setting parameters'
        : 'Starting the kernel';
    }
    return hasParameters ? 'Setting parameters' : 'Running';
  }
  const number = total === null ? done + 1 : Math.min(done + 1, total);
  return total === null
    ? `Running cell ${number}`
    : `Running cell ${number} of ${total}`;
}

function cells(count: number): string {
  return count === 1 ? 'cell' : 'cells';
}
