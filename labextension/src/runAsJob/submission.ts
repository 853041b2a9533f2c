/**
 * What a job request holds: names, the create body from the dialog, a rerun of an
 * earlier job, and where an executed notebook is saved in the user's files.
 */
import {
  ICreateJob,
  IDescribeJob,
  JsonValue,
  OutputFormat
} from '../common/models';

/**
 * The folder, under the server root, that executed notebooks are saved into.
 */
export const OUTPUT_FOLDER = 'job-outputs';

/**
 * The most characters in a job name (the server's `MAX_NAME_LENGTH`).
 */
export const MAX_NAME_LENGTH = 100;

/**
 * The notebook's name without folder and extension: "train" for "project/train.ipynb".
 */
export function notebookStem(path: string): string {
  const base = path.split('/').pop() ?? path;
  return base.replace(/\.ipynb$/i, '') || base;
}

/**
 * The job name the dialog starts with: the notebook's name and the local time,
 * "train 2024-05-06 10:15".
 */
export function defaultJobName(path: string, now: Date): string {
  const pad = (value: number) => String(value).padStart(2, '0');
  const stamp =
    `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())} ` +
    `${pad(now.getHours())}:${pad(now.getMinutes())}`;
  const stem = notebookStem(path).slice(0, MAX_NAME_LENGTH - stamp.length - 1);
  return `${stem} ${stamp}`;
}

/**
 * A name for a rerun of `name` that none of `taken` has: "run1 (2)", then the next free
 * number ("run1 (2)" reruns as "run1 (3)", not "run1 (2) (2)").
 */
export function rerunName(name: string, taken: Iterable<string>): string {
  const names = new Set(taken);
  const base = name.replace(/ \(\d+\)$/, '') || name;
  for (let number = 2; ; number++) {
    const suffix = ` (${number})`;
    const candidate = base.slice(0, MAX_NAME_LENGTH - suffix.length) + suffix;
    if (!names.has(candidate)) {
      return candidate;
    }
  }
}

/**
 * What the dialog collected.
 */
export interface IJobForm {
  inputPath: string;
  name: string;
  flavor: string | null;
  parameters: { [name: string]: JsonValue };
  deadlineMinutes: number | null;
  html: boolean;
  idempotencyToken: string;
  /**
   * Mail the owner when the job ends (the job's own setting); false: the owner's default.
   */
  notifyEmail?: boolean; /**
   * The job this form runs again (its notebook snapshot, its limits and kernel).
   */
  rerunOf?: Pick<
    IDescribeJob,
    'job_id' | 'cell_timeout_seconds' | 'kernel_name'
  > | null;
}

/**
 * The create request for the dialog's form.
 */
export function createRequest(form: IJobForm): ICreateJob {
  const formats: OutputFormat[] = form.html ? ['ipynb', 'html'] : ['ipynb'];
  return {
    input_path: form.inputPath,
    name: form.name.trim() || null,
    flavor: form.flavor,
    parameters: form.parameters,
    deadline_seconds:
      form.deadlineMinutes === null ? null : form.deadlineMinutes * 60,
    output_formats: formats,
    idempotency_token: form.idempotencyToken,
    ...(form.notifyEmail ? { notify: { email: true } } : {}),
    ...(form.rerunOf
      ? {
          rerun_of: form.rerunOf.job_id,
          cell_timeout_seconds: form.rerunOf.cell_timeout_seconds,
          kernel_name: form.rerunOf.kernel_name
        }
      : {})
  };
}

/**
 * Where the executed notebook of `job` is saved: "job-outputs/train-run-3f2a1b4c.ipynb".
 * The name keeps letters, digits, '.', '_' and '-' (others become '-'), and the
 * first 8 characters of the job id keep runs of the same name apart.
 */
export function executedNotebookPath(
  job: Pick<IDescribeJob, 'job_id' | 'name'>,
  folder: string = OUTPUT_FOLDER
): string {
  const safe =
    job.name
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .replace(/[^A-Za-z0-9._-]+/g, '-')
      .replace(/^[-.]+|-+$/g, '')
      .slice(0, 60) || 'job';
  return `${folder}/${safe}-${job.job_id.slice(0, 8)}.ipynb`;
}

/**
 * True for an executed notebook of a job, as Open saves them (under `job-outputs/`):
 * a result to read, never a stage of a pipeline. `path` is the server's (no drive).
 */
export function isJobOutput(path: string): boolean {
  return path.replace(/^\/+/, '').startsWith(`${OUTPUT_FOLDER}/`);
}

/**
 * True when the job has written an output in `format`.
 */
export function hasOutput(
  job: Pick<IDescribeJob, 'outputs'>,
  format: OutputFormat
): boolean {
  return (job.outputs ?? []).some(output => output.format === format);
}
