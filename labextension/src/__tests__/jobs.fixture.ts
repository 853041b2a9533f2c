import { IDescribeJob, IJobFlavorInfo } from '../common/models';

/**
 * A job as the API describes it, with `overrides` on top of a completed job.
 */
export function makeJob(overrides: Partial<IDescribeJob> = {}): IDescribeJob {
  return {
    job_id: '3f2a1b4c-0000-4000-8000-000000000001',
    owner: 'student1',
    name: 'train',
    flavor: 'quarter-4090',
    status: 'COMPLETED',
    status_message: null,
    create_time: '2024-05-06T10:00:00.000Z',
    update_time: '2024-05-06T10:20:00.000Z',
    start_time: '2024-05-06T10:01:00.000Z',
    end_time: '2024-05-06T10:13:00.000Z',
    exit_code: 0,
    error: null,
    cells_completed: 10,
    cells_total: 10,
    current_cell: null,
    queue_position: null,
    outputs: [
      { name: 'train-3f2a1b4c.ipynb', format: 'ipynb', size: 2048 },
      { name: 'train-3f2a1b4c.html', format: 'html', size: 4096 }
    ],
    log_size: 512,
    input_path: 'project/train.ipynb',
    parameters: { lr: 0.01 },
    deadline_seconds: 1800,
    cell_timeout_seconds: null,
    output_formats: ['ipynb', 'html'],
    kernel_name: 'python3',
    gpu: { description: '1/4 of an RTX 4090, 6 GiB', device_ids: ['0'] },
    flavor_title: 'Quarter RTX 4090',
    own: true,
    can_stop: true,
    can_delete: true,
    can_rerun: true,
    ...overrides
  };
}

/**
 * Jobs of a list, one a row: its id, name and creation time (what lists sort, find
 * and link jobs by), then what else differs from `makeJob`'s completed job.
 */
export function listedJobs(
  rows: [string, string, string, Partial<IDescribeJob>?][]
): IDescribeJob[] {
  return rows.map(([job_id, name, create_time, overrides]) =>
    makeJob({ job_id, name, create_time, ...overrides })
  );
}

/**
 * A flavor as the API lists it, with `overrides` on top of an available GPU share.
 */
export function makeFlavor(
  overrides: Partial<IJobFlavorInfo> = {}
): IJobFlavorInfo {
  return {
    id: 'quarter-4090',
    title: 'Quarter RTX 4090',
    description: 'For course exercises.',
    gpu: '1/4 of an RTX 4090, 6 GiB',
    resources: '2 CPUs, 8 GiB',
    available: true,
    reason: 'through ML101',
    default: false,
    default_deadline_seconds: 1800,
    max_deadline_seconds: 4 * 3600,
    max_running_per_user: 1,
    running: 2,
    queued: 1,
    budget: null,
    budget_pattern: null,
    budget_moments: [],
    budget_exhausted: false,
    starts_now: null,
    forecast: null,
    ...overrides
  };
}
