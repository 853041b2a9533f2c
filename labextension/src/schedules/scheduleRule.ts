/**
 * Schedules in words and from the form: the rule of a schedule as people say it
 * ("Every 15 minutes, between 10:00 and 18:00"), its stop conditions, its status
 * sentence, the buttons it allows, and the create request for what the Run as Job
 * dialog's "Repeat on a schedule" collected.
 */
import { formatTime, parseTime } from '../common/format';
import { ICreateJob } from '../common/models';
import { ICreatePipeline } from '../pipelines/pipelineModels';
import { ICreateSchedule, ISchedule, IScheduleWindow } from './scheduleModels';

const DAYS = [
  'Sunday',
  'Monday',
  'Tuesday',
  'Wednesday',
  'Thursday',
  'Friday',
  'Saturday'
];

/**
 * The shortest interval the server takes (`MIN_INTERVAL_SECONDS`).
 */
export const MIN_INTERVAL_SECONDS = 60;

/**
 * "Every 15 minutes", "Every 2 hours", "Every day", "Every 90 minutes".
 */
export function intervalText(seconds: number): string {
  const units: [number, string][] = [
    [7 * 86400, 'week'],
    [86400, 'day'],
    [3600, 'hour'],
    [60, 'minute'],
    [1, 'second']
  ];
  for (const [size, unit] of units) {
    if (seconds % size === 0) {
      const count = seconds / size;
      return count === 1 ? `Every ${unit}` : `Every ${count} ${unit}s`;
    }
  }
  return `Every ${seconds} seconds`;
}

/**
 * A cron expression in words for the common shapes ("Every day at 09:00",
 * "Weekdays at 09:30", "Every 15 minutes"); others read as the expression itself.
 */
export function cronText(cron: string): string {
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5) {
    return `On “${cron}”`;
  }
  const [minute, hour, dayOfMonth, month, dayOfWeek] = fields;
  const anyDay = dayOfMonth === '*' && month === '*';
  const number = /^\d{1,2}$/;
  const step = /^\*\/(\d+)$/;
  if (anyDay && dayOfWeek === '*' && hour === '*') {
    if (minute === '*') {
      return 'Every minute';
    }
    const minutes = step.exec(minute);
    if (minutes) {
      return intervalText(Number(minutes[1]) * 60);
    }
    if (number.test(minute)) {
      return `Every hour at minute ${Number(minute)}`;
    }
  }
  if (anyDay && number.test(minute) && number.test(hour)) {
    const clock = `${pad(Number(hour))}:${pad(Number(minute))}`;
    if (dayOfWeek === '*') {
      return `Every day at ${clock}`;
    }
    if (dayOfWeek === '1-5') {
      return `Weekdays at ${clock}`;
    }
    if (dayOfWeek === '0,6' || dayOfWeek === '6,0') {
      return `Weekends at ${clock}`;
    }
    if (/^[0-7]$/.test(dayOfWeek)) {
      return `Every ${DAYS[Number(dayOfWeek) % 7]} at ${clock}`;
    }
  }
  return `On cron “${fields.join(' ')}”`;
}

/**
 * The daily window as "between 10:00 and 18:00".
 */
export function windowText(window: IScheduleWindow): string {
  return `between ${clockOf(window.start)} and ${clockOf(window.end)}`;
}

/**
 * The whole rule: "Every 15 minutes, between 10:00 and 18:00 (Europe/Zurich)".
 */
export function ruleText(
  schedule: Pick<
    ICreateSchedule,
    'cron' | 'interval_seconds' | 'window' | 'timezone'
  >
): string {
  const rhythm = schedule.cron
    ? cronText(schedule.cron)
    : intervalText(schedule.interval_seconds ?? 0);
  const window = schedule.window ? `, ${windowText(schedule.window)}` : '';
  const zone = schedule.timezone ? ` (${schedule.timezone})` : '';
  return `${rhythm}${window}${zone}`;
}

/**
 * The stop conditions, or an empty string when it runs until deleted:
 * "Until 2026-12-01 09:00 · at most 5 runs · ends after 3 failures in a row".
 */
export function stopText(
  schedule: Pick<
    ICreateSchedule,
    'end_time' | 'max_runs' | 'max_failures_in_a_row'
  >,
  now: Date = new Date()
): string {
  const parts: string[] = [];
  if (schedule.end_time) {
    parts.push(`until ${formatTime(schedule.end_time, now)}`);
  }
  if (schedule.max_runs) {
    parts.push(
      schedule.max_runs === 1 ? 'one run' : `at most ${schedule.max_runs} runs`
    );
  }
  if (schedule.max_failures_in_a_row) {
    const count = schedule.max_failures_in_a_row;
    parts.push(
      count === 1
        ? 'ends at its first failure'
        : `ends after ${count} failures in a row`
    );
  }
  const text = parts.join(' · ');
  return text ? text.charAt(0).toUpperCase() + text.slice(1) : '';
}

/**
 * The schedule's status in a sentence: the server's own when it gave one, else
 * "Next run 10:15." / "Paused: no run starts until you resume it." / "Ended.".
 */
export function scheduleStatusLine(
  schedule: Pick<ISchedule, 'status' | 'status_message' | 'next_run_time'>,
  now: Date = new Date()
): string {
  if (schedule.status_message) {
    return schedule.status_message;
  }
  switch (schedule.status) {
    case 'ACTIVE':
      return parseTime(schedule.next_run_time)
        ? `Next run ${formatTime(schedule.next_run_time, now)}.`
        : 'No run is due.';
    case 'PAUSED':
      return 'Paused: no run starts until you resume it.';
    default:
      return 'Ended: it starts no more runs.';
  }
}

/**
 * The buttons a schedule allows: Pause while active, Resume while paused (an ended
 * schedule cannot come back), Delete always.
 */
export function scheduleActions(schedule: Pick<ISchedule, 'status'>): {
  pause: boolean;
  resume: boolean;
  delete: boolean;
} {
  return {
    pause: schedule.status === 'ACTIVE',
    resume: schedule.status === 'PAUSED',
    delete: true
  };
}

/**
 * The display name of a schedule: its own, the job's, or the notebook's.
 */
export function scheduleName(
  schedule: Pick<ISchedule, 'name' | 'job' | 'pipeline_name'>
): string {
  return (
    schedule.name ||
    schedule.job?.name ||
    schedule.job?.input_path ||
    schedule.pipeline_name ||
    ''
  );
}

/**
 * What a schedule runs, in words: the notebook, or "pipeline “nightly” (3 stages)".
 */
export function scheduleTarget(
  schedule: Pick<ISchedule, 'job' | 'pipeline' | 'pipeline_name'>
): string {
  if (schedule.job) {
    return schedule.job.input_path;
  }
  const name = schedule.pipeline?.name ?? schedule.pipeline_name ?? '';
  const stages = schedule.pipeline?.stages.length ?? 0;
  return stages
    ? `pipeline “${name}” (${stages} ${stages === 1 ? 'stage' : 'stages'})`
    : `pipeline “${name}”`;
}

/**
 * What "Repeat on a schedule" collected, as typed.
 */
export interface IScheduleForm {
  rhythm: 'interval' | 'cron';
  /**
   * The number of `intervalUnit`s between runs.
   */
  intervalCount: string;
  intervalUnit: 'minutes' | 'hours';
  cron: string;
  useWindow: boolean;
  /**
   * "HH:MM", as an `<input type="time">` gives it.
   */
  windowStart: string;
  windowEnd: string;
  timezone: string;
  /**
   * "YYYY-MM-DDTHH:MM" in the browser's time, as `<input type="datetime-local">`
   * gives it; empty: no end date.
   */
  endDate: string;
  maxRuns: string;
  maxFailures: string;
}

/**
 * The form as it opens: every hour, in the browser's time zone, no stop condition.
 */
export function defaultScheduleForm(
  timezone: string = browserTimeZone()
): IScheduleForm {
  return {
    rhythm: 'interval',
    intervalCount: '1',
    intervalUnit: 'hours',
    cron: '0 9 * * 1-5',
    useWindow: false,
    windowStart: '09:00',
    windowEnd: '18:00',
    timezone,
    endDate: '',
    maxRuns: '',
    maxFailures: ''
  };
}

/**
 * The browser's IANA time zone ("Europe/Zurich"); "UTC" when it cannot tell.
 */
export function browserTimeZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  } catch {
    return 'UTC';
  }
}

/**
 * The form fields a problem can be shown next to.
 */
export type ScheduleField =
  | 'rhythm'
  | 'window'
  | 'timezone'
  | 'end_time'
  | 'max_runs'
  | 'max_failures_in_a_row';

/**
 * Problems with the form, by field, in sentences.
 */
export type ScheduleProblems = Partial<Record<ScheduleField, string>>;

const FIELD_OF_INPUT: { [key in keyof IScheduleForm]: ScheduleField } = {
  rhythm: 'rhythm',
  intervalCount: 'rhythm',
  intervalUnit: 'rhythm',
  cron: 'rhythm',
  useWindow: 'window',
  windowStart: 'window',
  windowEnd: 'window',
  timezone: 'timezone',
  endDate: 'end_time',
  maxRuns: 'max_runs',
  maxFailures: 'max_failures_in_a_row'
};

/**
 * The problems left once the user changed `changes`: those of the changed fields go.
 */
export function problemsAfterEdit(
  problems: ScheduleProblems,
  changes: Partial<IScheduleForm>
): ScheduleProblems {
  const left = { ...problems };
  for (const key of Object.keys(changes) as (keyof IScheduleForm)[]) {
    delete left[FIELD_OF_INPUT[key]];
  }
  return left;
}

/**
 * The create request for `job` repeated as `form` says, or what is wrong with the
 * form (the server checks again, and its problems show at the same fields).
 */
export function scheduleRequest(
  job: ICreateJob,
  form: IScheduleForm
): ScheduleRequestResult {
  return withRhythm({ job, name: job.name ?? null }, form);
}

/**
 * The create request for a pipeline (as the builder arranged it) repeated as
 * `form` says: each run starts the pipeline anew.
 */
export function pipelineScheduleRequest(
  pipeline: ICreatePipeline,
  form: IScheduleForm
): ScheduleRequestResult {
  return withRhythm({ pipeline, name: pipeline.name }, form);
}

/**
 * A schedule's create request, or what is wrong with the form, by field.
 */
export type ScheduleRequestResult =
  | { ok: true; request: ICreateSchedule }
  | { ok: false; problems: ScheduleProblems };

function withRhythm(
  target: Pick<ICreateSchedule, 'job' | 'pipeline' | 'name'>,
  form: IScheduleForm
): ScheduleRequestResult {
  const problems: ScheduleProblems = {};
  const request: ICreateSchedule = {
    ...target,
    timezone: form.timezone.trim() || 'UTC'
  };
  if (form.rhythm === 'interval') {
    const count = Number(form.intervalCount);
    const seconds = count * (form.intervalUnit === 'hours' ? 3600 : 60);
    if (!Number.isInteger(count) || count < 1) {
      problems.rhythm = 'Give a whole number of minutes or hours, 1 or more.';
    } else if (seconds < MIN_INTERVAL_SECONDS) {
      problems.rhythm = 'Runs are at least a minute apart.';
    } else {
      request.interval_seconds = seconds;
    }
  } else {
    const cron = form.cron.trim().split(/\s+/).join(' ');
    if (cron.split(' ').length !== 5) {
      problems.rhythm =
        'Give five cron fields (minute hour day-of-month month day-of-week), such as “*/15 9-17 * * 1-5”.';
    } else {
      request.cron = cron;
    }
  }
  if (form.useWindow) {
    if (!form.windowStart || !form.windowEnd) {
      problems.window = 'Give both the start and the end of the window.';
    } else if (form.windowEnd <= form.windowStart) {
      problems.window =
        'The window ends before it starts; give an end later in the day than the start.';
    } else {
      request.window = { start: form.windowStart, end: form.windowEnd };
    }
  }
  if (form.endDate) {
    const end = new Date(form.endDate);
    if (Number.isNaN(end.getTime())) {
      problems.end_time = 'Give the end date as a date and a time.';
    } else {
      request.end_time = end.toISOString();
    }
  }
  const positive = (
    text: string,
    field: 'max_runs' | 'max_failures_in_a_row',
    sentence: string
  ) => {
    if (!text.trim()) {
      return;
    }
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1) {
      problems[field] = sentence;
    } else {
      request[field] = value;
    }
  };
  positive(
    form.maxRuns,
    'max_runs',
    'Give a whole number of runs, 1 or more, or leave it empty.'
  );
  positive(
    form.maxFailures,
    'max_failures_in_a_row',
    'Give a whole number of failures, 1 or more, or leave it empty.'
  );
  if (Object.keys(problems).length > 0) {
    return { ok: false, problems };
  }
  return { ok: true, request };
}

/**
 * The form field a server problem belongs to ("window.start" → window,
 * "interval_seconds" → rhythm); null for problems of the job or the whole body.
 */
export function scheduleFieldOf(serverField: string): ScheduleField | null {
  const head = serverField.split('.')[0];
  switch (head) {
    case 'cron':
    case 'interval_seconds':
      return 'rhythm';
    case 'window':
    case 'timezone':
    case 'end_time':
    case 'max_runs':
    case 'max_failures_in_a_row':
      return head;
    case 'start_time':
      return 'end_time';
    default:
      return null;
  }
}

function clockOf(time: string): string {
  return time.slice(0, 5);
}

function pad(value: number): string {
  return String(value).padStart(2, '0');
}
