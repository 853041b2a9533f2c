/**
 * What a pipeline's status allows and how its stages and jobs read in the Pipelines tab.
 */
import { jobProgress } from '../jobs/jobStatus';
import {
  ICreatePipeline,
  IDescribePipeline,
  IDescribePipelineJob,
  PipelineJobStatus,
  PipelineStatus,
  PipelineTemplateRun
} from './pipelineModels';

const FINAL_PIPELINE: readonly PipelineStatus[] = [
  'COMPLETED',
  'FAILED',
  'STOPPED'
];

const FINAL_JOB: readonly PipelineJobStatus[] = [
  'COMPLETED',
  'FAILED',
  'STOPPED',
  'SKIPPED'
];

/**
 * True once the pipeline can change no more.
 */
export function isPipelineFinal(status: PipelineStatus): boolean {
  return FINAL_PIPELINE.includes(status);
}

/**
 * True while some pipeline can still change (the tab keeps refreshing): the
 * pipeline itself, or one of its jobs (a failed pipeline's job beside the failure
 * is still stopping after the pipeline has ended).
 */
export function hasUnfinishedPipelines(
  pipelines: readonly Pick<IDescribePipeline, 'status' | 'stages'>[]
): boolean {
  return pipelines.some(
    pipeline =>
      !isPipelineFinal(pipeline.status) ||
      (pipeline.stages ?? []).some(stage =>
        stage.jobs.some(
          job => job.status !== 'PENDING' && !isPipelineJobFinal(job.status)
        )
      )
  );
}

/**
 * The buttons a pipeline offers the viewer: Stop while it runs (not once it is
 * stopping), Delete once it is over; each only when the service says this viewer may.
 */
export function pipelineActions(
  pipeline: Pick<
    IDescribePipeline,
    'status' | 'can_stop' | 'can_delete' | 'can_rerun'
  >
): { stop: boolean; delete: boolean; rerun: boolean } {
  return {
    stop: pipeline.can_stop && pipeline.status === 'RUNNING',
    delete: pipeline.can_delete && isPipelineFinal(pipeline.status),
    rerun: pipeline.can_rerun && isPipelineFinal(pipeline.status)
  };
}

/**
 * The request that runs a finished pipeline again: its template (as saved now) with
 * the same pipeline-wide values, or the same stages, notebooks, flavors and values.
 */
export function pipelineRerunRequest(
  pipeline: IDescribePipeline
): ICreatePipeline | PipelineTemplateRun {
  if (pipeline.template_path) {
    return {
      template_path: pipeline.template_path,
      parameters: { ...pipeline.parameters }
    };
  }
  return {
    name: pipeline.name,
    stages: pipeline.stages.map(stage => ({
      name: stage.name,
      jobs: stage.jobs.map(job => ({
        input_path: job.input_path,
        name: job.name,
        flavor: job.flavor,
        parameters: { ...job.parameters }
      }))
    })),
    parameters: { ...pipeline.parameters },
    shared_folder: pipeline.shared_folder
  };
}

/**
 * A status as a word: "Pending", "Skipped", "Running".
 */
export function pipelineStatusLabel(status: string): string {
  return status.charAt(0) + status.slice(1).toLowerCase();
}

/**
 * The name a job of a pipeline goes by: its own, else its notebook's file name.
 */
export function pipelineJobName(
  job: Pick<IDescribePipelineJob, 'name' | 'input_path'>
): string {
  return job.name || job.input_path.split('/').pop() || job.input_path;
}

/**
 * Why a job of a pipeline is where it is, in a sentence: the service's own
 * ("Stopped because 'eval-b.ipynb' of stage 'train' failed."), else where it failed
 * ("Failed in cell 3: ValueError: bad value."), else what it waits for.
 */
export function pipelineJobWhy(job: IDescribePipelineJob): string {
  if (job.status_message) {
    return job.status_message;
  }
  switch (job.status) {
    case 'PENDING':
      return 'Waits for the stage before it.';
    case 'SKIPPED':
      return 'Skipped: an earlier stage did not complete.';
    case 'FAILED':
      if (job.error) {
        const where =
          job.error.cell_index === null || job.error.cell_index === undefined
            ? 'Failed'
            : `Failed in cell ${job.error.cell_index + 1}`;
        return `${where}: ${job.error.ename}: ${job.error.evalue}`;
      }
      return 'Failed.';
    default:
      return '';
  }
}

/**
 * "3 of 10 cells" for a job that ran; empty for one that never started.
 */
export function pipelineJobProgress(job: IDescribePipelineJob): string {
  if (job.status === 'PENDING' || job.status === 'SKIPPED') {
    return '';
  }
  return jobProgress(job).text;
}

/**
 * True when the job has a log to open (a job was made for it).
 */
export function hasJob(
  job: Pick<IDescribePipelineJob, 'job_id'>
): job is IDescribePipelineJob & { job_id: string } {
  return typeof job.job_id === 'string' && job.job_id !== '';
}

/**
 * True once the job of a pipeline can change no more.
 */
export function isPipelineJobFinal(status: PipelineJobStatus): boolean {
  return FINAL_JOB.includes(status);
}
