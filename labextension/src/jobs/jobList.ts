/**
 * Which jobs the Jobs panel lists, and in what order.
 */
import { isFinal } from './jobStatus';
import {
  IDescribeJob,
  JobStatus,
  SortField,
  SortOrder
} from '../common/models';

/**
 * The status filter: one status, every unfinished job, or all jobs.
 */
export type StatusFilter = JobStatus | 'ACTIVE' | 'ALL';

/**
 * What the user typed and picked above the job list.
 */
export interface IJobFilter {
  status: StatusFilter;
  /**
   * A case-insensitive part of the job's name; empty: any name.
   */
  name: string;
}

/**
 * The order of the job list.
 */
export interface IJobSort {
  by: SortField;
  order: SortOrder;
}

/**
 * Newest first, as the panel opens.
 */
export const DEFAULT_SORT: IJobSort = { by: 'create_time', order: 'desc' };

/**
 * All jobs, as the panel opens.
 */
export const NO_FILTER: IJobFilter = { status: 'ALL', name: '' };

/**
 * Statuses in the order "sort by status" lists them: what needs attention first.
 */
const ATTENTION_ORDER: readonly JobStatus[] = [
  'RUNNING',
  'STOPPING',
  'QUEUED',
  'CREATED',
  'FAILED',
  'STOPPED',
  'COMPLETED'
];

/**
 * The jobs that pass the filter, in their original order.
 */
export function filterJobs(
  jobs: readonly IDescribeJob[],
  filter: IJobFilter
): IDescribeJob[] {
  const name = filter.name.trim().toLocaleLowerCase();
  return jobs.filter(job => {
    if (filter.status === 'ACTIVE' && isFinal(job.status)) {
      return false;
    }
    if (
      filter.status !== 'ALL' &&
      filter.status !== 'ACTIVE' &&
      job.status !== filter.status
    ) {
      return false;
    }
    return !name || job.name.toLocaleLowerCase().includes(name);
  });
}

/**
 * The jobs in the asked order (a new array). Ties go newest first, then by job id,
 * so the order never flickers between two refreshes.
 */
export function sortJobs(
  jobs: readonly IDescribeJob[],
  sort: IJobSort
): IDescribeJob[] {
  const direction = sort.order === 'asc' ? 1 : -1;
  const primary = (a: IDescribeJob, b: IDescribeJob): number => {
    switch (sort.by) {
      case 'name':
        return a.name.localeCompare(b.name, undefined, {
          sensitivity: 'base',
          numeric: true
        });
      case 'status':
        return (
          ATTENTION_ORDER.indexOf(a.status) - ATTENTION_ORDER.indexOf(b.status)
        );
      default:
        return createdAt(a) - createdAt(b);
    }
  };
  return [...jobs].sort(
    (a, b) =>
      direction * primary(a, b) ||
      createdAt(b) - createdAt(a) ||
      a.job_id.localeCompare(b.job_id)
  );
}

/**
 * True while some job can still change (the panel keeps refreshing).
 */
export function hasUnfinishedJobs(jobs: readonly IDescribeJob[]): boolean {
  return jobs.some(job => !isFinal(job.status));
}

/**
 * The list with `job` in it: replacing the job with the same id, or added first.
 */
export function upsertJob(
  jobs: readonly IDescribeJob[],
  job: IDescribeJob
): IDescribeJob[] {
  const index = jobs.findIndex(item => item.job_id === job.job_id);
  if (index < 0) {
    return [job, ...jobs];
  }
  const updated = [...jobs];
  updated[index] = job;
  return updated;
}

function createdAt(job: IDescribeJob): number {
  const time = Date.parse(job.create_time);
  return Number.isNaN(time) ? 0 : time;
}
