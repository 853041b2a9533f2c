/**
 * Wire models of the job API, mirrored one-to-one from `jupyter_to_job/models.py`.
 *
 * Field names are the snake_case names on the wire. Times are ISO-8601 strings
 * in UTC (`"2024-05-06T10:15:00.123Z"`), `null` until the moment has happened.
 * Cell indices are 0-based positions in the executed notebook.
 */

/**
 * Where a job is in its life (`JobStatus`):
 * CREATED → QUEUED → RUNNING → (STOPPING →) COMPLETED | FAILED | STOPPED.
 */
export type JobStatus =
  | 'CREATED'
  | 'QUEUED'
  | 'RUNNING'
  | 'STOPPING'
  | 'COMPLETED'
  | 'FAILED'
  | 'STOPPED';

/**
 * Every status, in life order.
 */
export const JOB_STATUSES: readonly JobStatus[] = [
  'CREATED',
  'QUEUED',
  'RUNNING',
  'STOPPING',
  'COMPLETED',
  'FAILED',
  'STOPPED'
];

/**
 * Statuses a job can no longer leave (`FINAL_STATUSES`).
 */
export const FINAL_STATUSES: readonly JobStatus[] = [
  'COMPLETED',
  'FAILED',
  'STOPPED'
];

/**
 * A file a job can produce (`OutputFormat`).
 */
export type OutputFormat = 'ipynb' | 'html';

/**
 * A JSON value, as pydantic's `JsonValue`.
 */
export type JsonValue =
  string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * A request to run a saved notebook as a job (`CreateJob`).
 */
export interface ICreateJob {
  input_path: string;
  name?: string | null;
  flavor?: string | null;
  parameters?: { [name: string]: JsonValue };
  deadline_seconds?: number | null;
  cell_timeout_seconds?: number | null;
  output_formats?: OutputFormat[];
  idempotency_token?: string | null;
  kernel_name?: string | null;
  /**
   * The job this one runs again (Rerun): only one's own jobs can be rerun.
   */
  rerun_of?: string | null;
  /**
   * Whom to tell when the job ends; null: the owner's default.
   */
  notify?: IJobNotify | null;
  /**
   * A checkpoint folder and retries: a job killed from outside starts again from it.
   */
  checkpoint?: IJobCheckpoint | null;
}

/**
 * A checkpoint folder and how often a job killed from outside starts again (`JobCheckpoint`).
 */
export interface IJobCheckpoint {
  /**
   * Relative to the notebook's folder: "checkpoints/train".
   */
  folder: string;
  retries?: number;
}

/**
 * Which endings of a job are told (`NotifyEvent`).
 */
export type NotifyEvent = 'completed' | 'failed' | 'stopped';

/**
 * Whom to tell when a job ends: its owner by mail, a signed webhook, or both (`JobNotify`).
 */
export interface IJobNotify {
  email?: boolean;
  /**
   * https only (http only to localhost).
   */
  webhook_url?: string | null;
  on?: NotifyEvent[];
}

/**
 * The caller's default for jobs without `notify` (`NotificationSettings`).
 */
export interface INotificationSettings {
  default?: IJobNotify;
  /**
   * PUT only: make a new webhook secret.
   */
  rotate_secret?: boolean;
  webhook_secret_set?: boolean;
  /**
   * Shown once, in the answer to the PUT that creates it.
   */
  webhook_secret?: string | null;
}

/**
 * Why a job failed, as the notebook reported it (`JobErrorInfo`).
 */
export interface IJobErrorInfo {
  cell_index: number | null;
  ename: string;
  evalue: string;
  traceback: string;
}

/**
 * One file a job produced (`JobOutput`).
 */
export interface IJobOutput {
  name: string;
  format: OutputFormat;
  size: number;
}

/**
 * The GPU share a job holds or held (`JobGPU`).
 */
export interface IJobGPU {
  description: string;
  device_ids: string[];
}

/**
 * Everything the Jobs panel shows about one job (`DescribeJob`).
 */
export interface IDescribeJob {
  job_id: string;
  owner: string;
  name: string;
  flavor: string | null;
  status: JobStatus;
  status_message: string | null;
  create_time: string;
  update_time: string;
  start_time: string | null;
  end_time: string | null;
  exit_code: number | null;
  error: IJobErrorInfo | null;
  cells_completed: number;
  cells_total: number | null;
  current_cell: number | null;
  queue_position: number | null;
  outputs: IJobOutput[];
  log_size: number;
  input_path: string;
  parameters: { [name: string]: JsonValue };
  deadline_seconds: number | null;
  cell_timeout_seconds: number | null;
  output_formats: OutputFormat[];
  kernel_name: string | null;
  gpu: IJobGPU | null;
  /**
   * The pods the job runs as, one per node: 1 but for a flavor on several nodes,
   * whose log lines start with `[rank N] ` (absent from an older server: 1).
   */
  nodes?: number;
  /**
   * The run under way or the last one, from 1.
   */
  attempt?: number;
  /**
   * Runs allowed in all: 1 plus the checkpoint's retries.
   */
  max_attempts?: number;
  checkpoint_folder?: string | null;
  /**
   * The pipeline that started the job; null for a job of its own.
   */
  pipeline_id?: string | null;
  /**
   * The schedule that started the job; null for a job of its own.
   */
  schedule_id?: string | null;
  /**
   * The job this one runs again (Rerun), whose notebook snapshot it ran.
   */
  rerun_of?: string | null;
  /**
   * The flavor's title for people ("One whole GPU"); null when it is not known.
   */
  flavor_title: string | null;
  /**
   * True when the job is the viewer's own (the service decides, per caller).
   */
  own: boolean;
  /**
   * The viewer may stop it while it is unfinished (its owner, a hub admin).
   */
  can_stop: boolean;
  /**
   * The viewer may delete it once it is finished.
   */
  can_delete: boolean;
  /**
   * The viewer may run it again (only its owner).
   */
  can_rerun: boolean;
}

/**
 * The answer to a create (`CreateJobResponse`).
 */
export interface ICreateJobResponse {
  job_id: string;
  /**
   * False when an earlier request with the same idempotency token made the job.
   */
  created: boolean;
  job: IDescribeJob;
}

/**
 * Fields a job list can be sorted by (`SortField`).
 */
export type SortField = 'create_time' | 'name' | 'status';

/**
 * Sort directions (`SortOrder`).
 */
export type SortOrder = 'asc' | 'desc';

/**
 * Filters, order and page of a job listing (`ListJobsQuery`).
 */
export interface IListJobsQuery {
  owner?: string | null;
  status?: JobStatus | null;
  name?: string | null;
  sort_by?: SortField;
  sort_order?: SortOrder;
  max_items?: number;
  next_token?: string | null;
}

/**
 * A page of jobs (`ListJobsResponse`).
 */
export interface IListJobsResponse {
  jobs: IDescribeJob[];
  next_token: string | null;
  total_count: number;
}

/**
 * A piece of a job's log (`JobLogChunk`); offsets count bytes.
 */
export interface IJobLogChunk {
  job_id: string;
  offset: number;
  next_offset: number;
  /**
   * Bytes in the whole log when this chunk was read.
   */
  size: number;
  data: string;
  /**
   * True when the job has finished and this chunk reaches the end of its log.
   */
  complete: boolean;
}

/**
 * A change to a job: only stopping it (`UpdateJob`).
 */
export interface IUpdateJob {
  status: 'STOPPED';
}

/**
 * One job flavor as the caller sees it (`JobFlavorInfo`).
 */
export interface IJobFlavorInfo {
  id: string;
  title: string;
  description: string;
  /**
   * The GPU share in words ("1/4 of an RTX 4090, 6 GiB"); null: no GPU.
   */
  gpu: string | null;
  /**
   * CPU and memory in words ("8 CPU, 32 GiB").
   */
  resources: string;
  available: boolean;
  /**
   * Why the caller may use it ("through ML101") or not.
   */
  reason: string;
  default: boolean;
  default_deadline_seconds: number;
  max_deadline_seconds: number;
  max_running_per_user: number;
  running: number;
  queued: number;
  /**
   * The GPU-hours the caller has left on it ("4.5 of your 6 GPU-hours left this
   * week (renews Monday 00:00, Europe/Zurich)"); null: no budget applies.
   */
  budget: string | null;
  /**
   * `budget` with each moment it names as "{0}", "{1}" ("... left this week
   * (renews {0})"), for the dialog to tell `budget_moments` in the reader's zone;
   * null: no budget applies.
   */
  budget_pattern: string | null;
  /**
   * The moments `budget_pattern` names, in order (ISO 8601, UTC).
   */
  budget_moments: string[];
  /**
   * True when no GPU-hours are left: a job would be refused.
   */
  budget_exhausted: boolean;
  /**
   * Whether a job of the caller's would start now (true) or wait in the queue
   * (false), as things stand; null: not known here.
   */
  starts_now: boolean | null;
  /**
   * Why it would start now or wait, in a sentence ('Starts now on a free GPU.',
   * 'Your own server (...) holds the GPU this job needs, ...').
   */
  forecast: string | null;
}

/**
 * The flavors the caller can see (`ListFlavorsResponse`).
 */
export interface IListFlavorsResponse {
  flavors: IJobFlavorInfo[];
}

/**
 * What the job back end supports (`JobFeatures`).
 */
export interface IJobFeatures {
  follow_logs: boolean;
  html_output: boolean;
  deadline: boolean;
  parameters: boolean;
  stop: boolean;
  delete: boolean;
  idempotency_token: boolean;
  queue: boolean;
  gpu_flavors: boolean;
  save_outputs: boolean;
  /**
   * The job service can mail a job's owner when it ends.
   */
  notify_email: boolean;
}

/**
 * `GET api/config`: how jobs run here (`JobServiceConfig`).
 */
export interface IJobServiceConfig {
  mode: 'hub' | 'standalone';
  version: string;
  features: IJobFeatures;
  max_notebook_bytes: number;
}

/**
 * Write a job's output into the user's files (`SaveOutput`).
 */
export interface ISaveOutput {
  path: string;
  overwrite: boolean;
}

/**
 * Where a saved output was written (`SavedOutput`).
 */
export interface ISavedOutput {
  path: string;
  size: number;
}

/**
 * A variable of a notebook's cell tagged 'parameters' (`NotebookParameter`).
 */
export interface INotebookParameter {
  name: string;
  /**
   * The annotation ("float", "list[int]"), or "None" when papermill cannot tell.
   */
  inferred_type_name: string;
  /**
   * The default as written in the cell: "0.01", "'adam'".
   */
  default: string;
  help: string;
}

/**
 * The parameters of one notebook (`NotebookParameters`).
 */
export interface INotebookParameters {
  path: string;
  parameters: INotebookParameter[];
}

/**
 * The GPU share and session end of the user's server (`ServerSession`).
 */
export interface IServerSession {
  profile: string | null;
  gpu_share: string | null;
  session_end: string | null;
  class_end: string | null;
}

/**
 * One wrong field of a request body (`FieldProblem`).
 */
export interface IFieldProblem {
  field: string;
  message: string;
}

/**
 * Every 4xx and 5xx answer of the job API (`ErrorResponse`).
 */
export interface IErrorResponse {
  message: string;
  reason: string;
  errors?: IFieldProblem[] | null;
}
