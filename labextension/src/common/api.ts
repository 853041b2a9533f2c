import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { requestAPI, requestRaw } from './handler';
import {
  ICreateJob,
  ICreateJobResponse,
  IDescribeJob,
  IJobFeatures,
  IJobFlavorInfo,
  IJobLogChunk,
  IJobServiceConfig,
  IListFlavorsResponse,
  IListJobsQuery,
  IListJobsResponse,
  INotebookParameter,
  INotebookParameters,
  INotificationSettings,
  ISavedOutput,
  ISaveOutput,
  IServerSession,
  IUpdateJob,
  OutputFormat
} from './models';
import {
  ICreatePipeline,
  IDescribePipeline,
  IListPipelinesResponse,
  IUpdatePipeline,
  PipelineTemplateRun,
  SavedPipelineTemplate
} from '../pipelines/pipelineModels';
import { IKeepAnswer, IReclaimAnswer } from '../session/reclaim';
import {
  ICreateSchedule,
  IListSchedulesResponse,
  ISchedule,
  IUpdateSchedule
} from '../schedules/scheduleModels';

/**
 * The most jobs one list request asks for (the server's `MAX_LIST_ITEMS`).
 */
export const PAGE_SIZE = 100;

/**
 * What a back end supports when its config leaves a feature out.
 */
export const DEFAULT_FEATURES: IJobFeatures = {
  follow_logs: true,
  html_output: true,
  deadline: true,
  parameters: true,
  stop: true,
  delete: true,
  idempotency_token: true,
  queue: true,
  gpu_flavors: false,
  save_outputs: false,
  notify_email: false
};

/**
 * The features of a config, with defaults for those it leaves out.
 */
export function featuresOf(
  config: Pick<IJobServiceConfig, 'features'> | null
): IJobFeatures {
  return { ...DEFAULT_FEATURES, ...(config?.features ?? {}) };
}

/**
 * The typed client of the jupyter_to_job server extension: one method per end point.
 */
export class JobsAPI {
  /**
   * @param serverSettings Connection settings; pass
   * `app.serviceManager.serverSettings` from a plugin.
   */
  constructor(
    readonly serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  /**
   * How jobs run here and what the back end supports. A 404 (no server extension)
   * or a 503 (hub service down) tells the UI that Run as Job cannot be used now.
   */
  getConfig(): Promise<IJobServiceConfig> {
    return this._get<IJobServiceConfig>('api/config');
  }

  /**
   * The flavors the user can see, available or not, with their queues.
   */
  async listFlavors(): Promise<IJobFlavorInfo[]> {
    return flavorsFrom(await this._get<unknown>('api/flavors'));
  }

  /**
   * The variables of the notebook's cell tagged 'parameters' (none when untagged).
   *
   * @param path The notebook, relative to the server root.
   */
  async getParameters(path: string): Promise<INotebookParameter[]> {
    return parametersFrom(
      await this._get<unknown>(
        'api/parameters' + URLExt.objectToQueryString({ path })
      )
    );
  }

  /**
   * The parameters of the notebook snapshot a job ran (what its rerun runs).
   */
  async getJobParameters(jobId: string): Promise<INotebookParameter[]> {
    return parametersFrom(
      await this._get<unknown>(
        'api/parameters' + URLExt.objectToQueryString({ job_id: jobId })
      )
    );
  }

  /**
   * Create a job. With the same idempotency token, a repeated call returns the job
   * the first one made.
   */
  async createJob(request: ICreateJob): Promise<IDescribeJob> {
    const body = await requestAPI<unknown>(
      'api/jobs',
      { method: 'POST', body: JSON.stringify(request) },
      this.serverSettings
    );
    return createdJobFrom(body);
  }

  /**
   * One page of jobs.
   */
  listJobs(query: IListJobsQuery = {}): Promise<IListJobsResponse> {
    return this._get<IListJobsResponse>(
      'api/jobs' + URLExt.objectToQueryString(withoutEmpty(query))
    );
  }

  /**
   * The user's most recent jobs, newest first, over at most `maxPages` pages.
   */
  async listRecentJobs(maxPages = 5): Promise<IListJobsResponse> {
    const jobs: IDescribeJob[] = [];
    let next: string | null = null;
    let total = 0;
    for (let page = 0; page < maxPages; page++) {
      const answer: IListJobsResponse = await this.listJobs({
        sort_by: 'create_time',
        sort_order: 'desc',
        max_items: PAGE_SIZE,
        next_token: next
      });
      jobs.push(...answer.jobs);
      total = answer.total_count;
      next = answer.next_token;
      if (!next) {
        break;
      }
    }
    return { jobs, next_token: next, total_count: total };
  }

  /**
   * One job.
   */
  getJob(jobId: string): Promise<IDescribeJob> {
    return this._get<IDescribeJob>(jobPath(jobId));
  }

  /**
   * Stop a job: a queued one at once, a running one after its current cell.
   */
  async stopJob(jobId: string): Promise<void> {
    const update: IUpdateJob = { status: 'STOPPED' };
    await requestAPI<unknown>(
      jobPath(jobId),
      { method: 'PATCH', body: JSON.stringify(update) },
      this.serverSettings
    );
  }

  /**
   * Delete a finished job, its outputs and its log.
   */
  async deleteJob(jobId: string): Promise<void> {
    await requestAPI<unknown>(
      jobPath(jobId),
      { method: 'DELETE' },
      this.serverSettings
    );
  }

  /**
   * Bytes `offset` onwards of the job's log, at most `limit` of them.
   */
  getLog(jobId: string, offset: number, limit?: number): Promise<IJobLogChunk> {
    const query = URLExt.objectToQueryString(withoutEmpty({ offset, limit }));
    return this._get<IJobLogChunk>(`${jobPath(jobId)}/logs${query}`);
  }

  /**
   * The content of one of the job's outputs, for a download.
   */
  async downloadOutput(jobId: string, format: OutputFormat): Promise<Blob> {
    const response = await requestRaw(
      `${jobPath(jobId)}/outputs/${format}`,
      { method: 'GET' },
      this.serverSettings
    );
    return response.blob();
  }

  /**
   * Write one of the job's outputs into the user's files.
   */
  saveOutput(
    jobId: string,
    format: OutputFormat,
    request: ISaveOutput
  ): Promise<ISavedOutput> {
    return requestAPI<ISavedOutput>(
      `${jobPath(jobId)}/outputs/${format}/save`,
      { method: 'POST', body: JSON.stringify(request) },
      this.serverSettings
    );
  }

  /**
   * The GPU share and session end of this server.
   */
  getSession(): Promise<IServerSession> {
    return this._get<IServerSession>('api/session');
  }

  /**
   * This server's reclaim warning, if the hub is about to stop it.
   */
  getReclaimWarning(): Promise<IReclaimAnswer> {
    return this._get<IReclaimAnswer>('api/reclaim');
  }

  /**
   * "I'm still using it": ask the hub to keep this server (once per server start).
   */
  keepServer(): Promise<IKeepAnswer> {
    return requestAPI<IKeepAnswer>(
      'api/reclaim/keep',
      { method: 'POST', body: '{}' },
      this.serverSettings
    );
  }

  /**
   * The user's default notifications (for jobs created without `notify`).
   */
  getNotificationSettings(): Promise<INotificationSettings> {
    return this._get<INotificationSettings>('api/notification-settings');
  }

  /**
   * Save the user's default notifications. The answer carries `webhook_secret` only
   * when this save made one (a first webhook, or `rotate_secret`): it is shown once.
   */
  putNotificationSettings(
    settings: INotificationSettings
  ): Promise<INotificationSettings> {
    return requestAPI<INotificationSettings>(
      'api/notification-settings',
      { method: 'PUT', body: JSON.stringify(settings) },
      this.serverSettings
    );
  }

  /**
   * The user's schedules, newest first.
   */
  async listSchedules(): Promise<ISchedule[]> {
    const body = await this._get<IListSchedulesResponse | ISchedule[]>(
      'api/schedules'
    );
    return Array.isArray(body) ? body : (body?.schedules ?? []);
  }

  /**
   * Schedule a saved notebook: the server reads `job.input_path` from the user's files.
   */
  createSchedule(request: ICreateSchedule): Promise<ISchedule> {
    return requestAPI<ISchedule>(
      'api/schedules',
      { method: 'POST', body: JSON.stringify(request) },
      this.serverSettings
    );
  }

  /**
   * Pause a schedule (`PAUSED`) or resume it (`ACTIVE`).
   */
  setScheduleStatus(
    scheduleId: string,
    status: IUpdateSchedule['status']
  ): Promise<ISchedule> {
    const update: IUpdateSchedule = { status };
    return requestAPI<ISchedule>(
      schedulePath(scheduleId),
      { method: 'PATCH', body: JSON.stringify(update) },
      this.serverSettings
    );
  }

  /**
   * Delete a schedule; the jobs it started stay.
   */
  async deleteSchedule(scheduleId: string): Promise<void> {
    await requestAPI<unknown>(
      schedulePath(scheduleId),
      { method: 'DELETE' },
      this.serverSettings
    );
  }

  /**
   * The user's pipelines, newest first.
   */
  async listPipelines(): Promise<IDescribePipeline[]> {
    const body = await this._get<IListPipelinesResponse | IDescribePipeline[]>(
      'api/pipelines'
    );
    return Array.isArray(body) ? body : (body?.pipelines ?? []);
  }

  /**
   * One pipeline.
   */
  getPipeline(pipelineId: string): Promise<IDescribePipeline> {
    return this._get<IDescribePipeline>(pipelinePath(pipelineId));
  }

  /**
   * Run notebooks as a pipeline (the server reads each `input_path` from the user's
   * files), or run a saved template with new pipeline-wide values.
   */
  createPipeline(
    request: ICreatePipeline | PipelineTemplateRun
  ): Promise<IDescribePipeline> {
    return requestAPI<IDescribePipeline>(
      'api/pipelines',
      { method: 'POST', body: JSON.stringify(request) },
      this.serverSettings
    );
  }

  /**
   * Stop a pipeline: its running jobs are stopped and the rest skipped.
   */
  stopPipeline(pipelineId: string): Promise<IDescribePipeline> {
    const update: IUpdatePipeline = { status: 'STOPPED' };
    return requestAPI<IDescribePipeline>(
      pipelinePath(pipelineId),
      { method: 'PATCH', body: JSON.stringify(update) },
      this.serverSettings
    );
  }

  /**
   * Delete a finished pipeline; its jobs stay.
   */
  async deletePipeline(pipelineId: string): Promise<void> {
    await requestAPI<unknown>(
      pipelinePath(pipelineId),
      { method: 'DELETE' },
      this.serverSettings
    );
  }

  /**
   * The pipeline template at `path` (`x.pipeline.yaml`), as a create request.
   */
  getPipelineTemplate(path: string): Promise<ICreatePipeline> {
    return this._get<ICreatePipeline>(
      'api/pipeline-templates' + URLExt.objectToQueryString({ path })
    );
  }

  /**
   * Save `pipeline` as a template file at `path`; a 409 when it exists and
   * `overwrite` is false.
   */
  savePipelineTemplate(
    path: string,
    pipeline: ICreatePipeline,
    overwrite = false
  ): Promise<SavedPipelineTemplate> {
    return requestAPI<SavedPipelineTemplate>(
      'api/pipeline-templates',
      {
        method: 'POST',
        body: JSON.stringify({ path, pipeline, overwrite })
      },
      this.serverSettings
    );
  }

  private _get<T>(endPoint: string): Promise<T> {
    return requestAPI<T>(endPoint, { method: 'GET' }, this.serverSettings);
  }
}

/**
 * The flavor list, whether the server sends `{"flavors": [...]}` or a bare list.
 *
 * @throws Error for any other answer (a proxy's page, say): an empty list would
 * read as "no flavors here" when nothing is known.
 */
export function flavorsFrom(body: unknown): IJobFlavorInfo[] {
  if (Array.isArray(body)) {
    return body as IJobFlavorInfo[];
  }
  const wrapped = (body as IListFlavorsResponse | null)?.flavors;
  if (Array.isArray(wrapped)) {
    return wrapped;
  }
  throw new Error(UNREADABLE_FLAVORS);
}

/**
 * The sentence for a flavor list answer that is not a flavor list.
 */
export const UNREADABLE_FLAVORS =
  'The server answered the flavor request with something other than a flavor list. ' +
  'Try again; if it keeps happening, tell the hub admins.';

/**
 * The parameter list, whether the server sends `{"path", "parameters": [...]}`
 * or a bare list.
 */
export function parametersFrom(body: unknown): INotebookParameter[] {
  if (Array.isArray(body)) {
    return body as INotebookParameter[];
  }
  const wrapped = (body as INotebookParameters | null)?.parameters;
  return Array.isArray(wrapped) ? wrapped : [];
}

/**
 * The new job, whether the server answers with a `CreateJobResponse` or the bare
 * `DescribeJob`.
 *
 * @throws Error when the answer describes no job, so that the dialog says so instead
 * of staying open without a word.
 */
export function createdJobFrom(body: unknown): IDescribeJob {
  const response = body as ICreateJobResponse | null;
  const job =
    response && typeof response.job === 'object' && response.job !== null
      ? response.job
      : (body as IDescribeJob | null);
  if (typeof job?.job_id !== 'string' || job.job_id === '') {
    throw new Error(UNREADABLE_JOB);
  }
  return job;
}

/**
 * The sentence for a create answer that describes no job. Submitting again is safe:
 * the dialog's idempotency token makes it the same job.
 */
export const UNREADABLE_JOB =
  'The server did not answer with the new job. Submit again: the job will not start twice.';

function jobPath(jobId: string): string {
  return `api/jobs/${encodeURIComponent(jobId)}`;
}

function pipelinePath(pipelineId: string): string {
  return `api/pipelines/${encodeURIComponent(pipelineId)}`;
}

function schedulePath(scheduleId: string): string {
  return `api/schedules/${encodeURIComponent(scheduleId)}`;
}

function withoutEmpty(values: object): { [key: string]: string | number } {
  const kept: { [key: string]: string | number } = {};
  for (const [key, value] of Object.entries(values)) {
    if (value !== null && value !== undefined && value !== '') {
      kept[key] = value;
    }
  }
  return kept;
}
