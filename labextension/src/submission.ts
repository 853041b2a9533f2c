/**
 * What a job request holds: names, the create body from the dialog, a rerun of an
 * earlier job, and where an executed notebook is saved in the user's files.
 */
import { ICreateJob, IDescribeJob, JsonValue, OutputFormat } from './models';

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
  notifyEmail?: boolean;
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
    ...(form.notifyEmail ? { notify: { email: true } } : {})
  };
}

/**
 * A request that runs `job` again: same notebook, flavor, parameters and limits,
 * under a new idempotency token (so it is a new job, started once).
 */
export function rerunRequest(
  job: IDescribeJob,
  idempotencyToken: string
): ICreateJob {
  return {
    input_path: job.input_path,
    name: job.name,
    flavor: job.flavor,
    parameters: { ...job.parameters },
    deadline_seconds: job.deadline_seconds,
    cell_timeout_seconds: job.cell_timeout_seconds,
    output_formats: [...job.output_formats],
    kernel_name: job.kernel_name,
    idempotency_token: idempotencyToken,
    rerun_of: job.job_id
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
 * True when the job has written an output in `format`.
 */
export function hasOutput(
  job: Pick<IDescribeJob, 'outputs'>,
  format: OutputFormat
): boolean {
  return (job.outputs ?? []).some(output => output.format === format);
}
