/**
 * Wire models of the pipeline API, mirrored one-to-one from
 * `jupyter_to_job/pipelines/models.py` (checked by pipelineModels.spec.ts).
 *
 * A pipeline is a list of stages run one after another; a stage is one or more
 * notebook jobs run in parallel. A failure stops the pipeline's running jobs and
 * skips the rest, each with a sentence saying why.
 */
import {
  IJobErrorInfo,
  IJobNotify,
  JobStatus,
  JsonValue
} from '../common/models';

/**
 * Where a pipeline is.
 */
export type PipelineStatus =
  'RUNNING' | 'STOPPING' | 'COMPLETED' | 'FAILED' | 'STOPPED';

/**
 * Where a stage is.
 */
export type StageStatus =
  'PENDING' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'STOPPED' | 'SKIPPED';

/**
 * Where a job of a pipeline is: PENDING and SKIPPED before (or instead of) a job.
 */
export type PipelineJobStatus = 'PENDING' | 'SKIPPED' | JobStatus;

/**
 * One notebook job of a stage (`PipelineJob`).
 */
export interface IPipelineJob {
  /**
   * The notebook, relative to the user's root folder.
   */
  input_path: string;
  name?: string | null;
  flavor?: string | null;
  /**
   * The job's own values; the pipeline-wide ones win.
   */
  parameters?: { [name: string]: JsonValue };
  deadline_seconds?: number | null;
  cell_timeout_seconds?: number | null;
  kernel_name?: string | null;
}

/**
 * A stage: jobs run in parallel (`PipelineStage`).
 */
export interface IPipelineStage {
  name: string;
  jobs: IPipelineJob[];
}

/**
 * A request to run notebooks as a pipeline (`CreatePipeline`).
 */
export interface ICreatePipeline {
  name: string;
  stages: IPipelineStage[];
  /**
   * Pipeline-wide values: a job gets `{...job.parameters, ...parameters}`.
   */
  parameters?: { [name: string]: JsonValue };
  /**
   * Relative to the user's home; null: "pipelines/<name>".
   */
  shared_folder?: string | null;
  notify?: IJobNotify | null;
  /**
   * The template it came from (read only on the wire back).
   */
  template_path?: string | null;
}

/**
 * One job of a pipeline as it runs (`DescribePipelineJob`).
 */
export interface IDescribePipelineJob {
  input_path: string;
  name: string | null;
  flavor: string | null;
  /**
   * The flavor's title for people ("CPU job"); null when it is not known.
   */
  flavor_title: string | null;
  parameters: { [name: string]: JsonValue };
  /**
   * Null while PENDING, or when SKIPPED.
   */
  job_id: string | null;
  status: PipelineJobStatus;
  /**
   * "Stopped because 'eval-b.ipynb' of stage 'train' failed."
   */
  status_message: string | null;
  error: IJobErrorInfo | null;
  cells_completed: number;
  cells_total: number | null;
}

/**
 * A stage as it runs (`DescribeStage`).
 */
export interface IDescribeStage {
  name: string;
  status: StageStatus;
  status_message: string | null;
  jobs: IDescribePipelineJob[];
}

/**
 * Everything the Pipelines tab shows about one pipeline (`DescribePipeline`).
 */
export interface IDescribePipeline {
  pipeline_id: string;
  owner: string;
  name: string;
  status: PipelineStatus;
  status_message: string | null;
  create_time: string;
  update_time: string;
  end_time: string | null;
  parameters: { [name: string]: JsonValue };
  /**
   * Relative to the owner's home.
   */
  shared_folder: string;
  template_path: string | null;
  /**
   * The running stage's index.
   */
  current_stage: number | null;
  stages: IDescribeStage[];
  own: boolean;
  can_stop: boolean;
  can_delete: boolean;
  can_rerun: boolean;
}

/**
 * The caller's pipelines, newest first (`ListPipelinesResponse`).
 */
export interface IListPipelinesResponse {
  pipelines: IDescribePipeline[];
}

/**
 * A change to a pipeline: only stopping it (`UpdatePipeline`).
 */
export interface IUpdatePipeline {
  status: 'STOPPED';
}

/**
 * `POST jupyter-to-job/api/pipelines` for a saved template: its pipeline-wide
 * values replaced by `parameters` (the server extension's own request).
 */
export type PipelineTemplateRun = {
  template_path: string;
  parameters: { [name: string]: JsonValue };
};

/**
 * Where a template was written (`POST jupyter-to-job/api/pipeline-templates`).
 */
export type SavedPipelineTemplate = {
  path: string;
  size: number;
};
