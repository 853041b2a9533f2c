/**
 * Wire models of the schedule API, mirrored one-to-one from
 * `jupyter_to_job/schedules/models.py` (checked by scheduleModels.spec.ts).
 *
 * Times are ISO-8601 strings with their offset; times of day are "HH:MM[:SS]" in the
 * schedule's time zone.
 */
import { ICreateJob, JobStatus } from '../common/models';
import { ICreatePipeline } from '../pipelines/pipelineModels';

/**
 * Where a schedule is: running its slots, paused by its owner, or over for good.
 */
export type ScheduleStatus = 'ACTIVE' | 'PAUSED' | 'ENDED';

/**
 * Run only between these times of day, in the schedule's time zone (`ScheduleWindow`).
 */
export interface IScheduleWindow {
  /**
   * The first time of day a run may start: "10:00".
   */
  start: string;
  /**
   * Runs start before this time of day: "18:00".
   */
  end: string;
}

/**
 * A notebook job, or a pipeline, to run on a cron expression or every
 * `interval_seconds` (`CreateSchedule`): exactly one of `job` and `pipeline`, and
 * exactly one of `cron` and `interval_seconds`.
 */
export interface ICreateSchedule {
  job?: ICreateJob | null;
  /**
   * The pipeline each run starts (instead of a job).
   */
  pipeline?: ICreatePipeline | null;
  name?: string | null;
  /**
   * Five cron fields, in the time zone: "0 9 * * 1-5".
   */
  cron?: string | null;
  /**
   * Seconds between runs, at least 60.
   */
  interval_seconds?: number | null;
  /**
   * An IANA time zone: "Asia/Taipei".
   */
  timezone?: string;
  window?: IScheduleWindow | null;
  start_time?: string | null;
  /**
   * The end date: no run after it, and the schedule ends.
   */
  end_time?: string | null;
  max_runs?: number | null;
  max_failures_in_a_row?: number | null;
}

/**
 * One slot handled, and the job it created (`ScheduleRun`).
 */
export interface IScheduleRun {
  slot_time: string;
  /**
   * Null: no job could be created (or the run started a pipeline).
   */
  job_id: string | null;
  /**
   * The pipeline a pipeline schedule's run started.
   */
  pipeline_id?: string | null;
  /**
   * Null while its job runs.
   */
  outcome: JobStatus | null;
  message: string | null;
}

/**
 * A schedule as its owner sees it (`Schedule`).
 */
export interface ISchedule {
  job: ICreateJob | null;
  pipeline?: ICreatePipeline | null;
  name: string | null;
  cron: string | null;
  interval_seconds: number | null;
  timezone: string;
  window: IScheduleWindow | null;
  start_time: string | null;
  end_time: string | null;
  max_runs: number | null;
  max_failures_in_a_row: number | null;
  schedule_id: string;
  owner: string;
  /**
   * The pipeline it runs, if any.
   */
  pipeline_name?: string | null;
  /**
   * Its job's flavor title, for people ("CPU job"); null for a pipeline, or when the
   * flavor is not known.
   */
  flavor_title?: string | null;
  status: ScheduleStatus;
  /**
   * Why it is paused or ended, in a sentence.
   */
  status_message: string | null;
  /**
   * Runs submitted so far.
   */
  runs: number;
  failures_in_a_row: number;
  last_slot_time: string | null;
  /**
   * The next slot; null: none.
   */
  next_run_time: string | null;
  last_job_id: string | null;
  /**
   * The last runs, newest first.
   */
  recent_runs: IScheduleRun[];
  create_time: string;
  update_time: string;
}

/**
 * PATCH: `{"status": "PAUSED"}` pauses, `{"status": "ACTIVE"}` resumes (`UpdateSchedule`).
 */
export interface IUpdateSchedule {
  status: ScheduleStatus;
}

/**
 * The caller's schedules, newest first (`ListSchedulesResponse`).
 */
export interface IListSchedulesResponse {
  schedules: ISchedule[];
}
