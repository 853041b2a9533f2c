/**
 * Schedules in words, and the create request from "Repeat on a schedule".
 */
import { zoneName } from '../../common/format';
import { ICreateJob } from '../../common/models';
import {
  cronText,
  defaultScheduleForm,
  IScheduleForm,
  pipelineScheduleRequest,
  problemsAfterEdit,
  ruleText,
  scheduleActions,
  scheduleFieldOf,
  scheduleRequest,
  scheduleStatusLine,
  scheduleTarget,
  stopText
} from '../scheduleRule';

const JOB: ICreateJob = {
  input_path: 'course/train.ipynb',
  name: 'train nightly',
  flavor: 'quarter-4090',
  parameters: { epochs: 3 }
};

function form(changes: Partial<IScheduleForm> = {}): IScheduleForm {
  return { ...defaultScheduleForm('Europe/Zurich'), ...changes };
}

describe('a schedule’s rule in words', () => {
  it.each([
    [{ interval_seconds: 900 }, 'Every 15 minutes (UTC)'],
    [{ interval_seconds: 7200 }, 'Every 2 hours (UTC)'],
    [{ interval_seconds: 86400 }, 'Every day (UTC)'],
    [{ interval_seconds: 5400 }, 'Every 90 minutes (UTC)'],
    [{ cron: '0 9 * * 1-5' }, 'Weekdays at 09:00 (UTC)'],
    [{ cron: '30 6 * * *' }, 'Every day at 06:30 (UTC)'],
    [{ cron: '0 22 * * 5' }, 'Every Friday at 22:00 (UTC)'],
    [{ cron: '*/10 * * * *' }, 'Every 10 minutes (UTC)'],
    [{ cron: '5 8-17 1 * *' }, 'On cron “5 8-17 1 * *” (UTC)']
  ])('reads %j as “%s”', (rhythm, words) => {
    expect(
      ruleText({
        cron: null,
        interval_seconds: null,
        window: null,
        timezone: 'UTC',
        ...rhythm
      })
    ).toBe(words);
  });

  it('names the daily window and the time zone', () => {
    expect(
      ruleText({
        cron: '* * * * *',
        interval_seconds: null,
        window: { start: '10:00:00', end: '18:00:00' },
        timezone: 'Asia/Taipei'
      })
    ).toBe('Every minute, between 10:00 and 18:00 (Asia/Taipei)');
    expect(cronText('0 * * * *')).toBe('Every hour at minute 0');
  });

  it('lists the stop conditions, and none for a schedule that runs until deleted', () => {
    const now = new Date(2026, 10, 25, 12, 0);
    expect(
      stopText(
        {
          end_time: new Date(2026, 11, 1, 9, 0).toISOString(),
          max_runs: 5,
          max_failures_in_a_row: 3
        },
        now
      )
    ).toBe(
      `Until 2026-12-01 09:00 ${zoneName(new Date(2026, 11, 1, 9, 0))} · ` +
        'at most 5 runs · ends after 3 failures in a row'
    );
    expect(
      stopText({ end_time: null, max_runs: null, max_failures_in_a_row: null })
    ).toBe('');
  });
});

describe('a schedule’s status and buttons', () => {
  it('offers Pause while active, Resume while paused, and only Delete once ended', () => {
    expect(scheduleActions({ status: 'ACTIVE' })).toEqual({
      pause: true,
      resume: false,
      delete: true
    });
    expect(scheduleActions({ status: 'PAUSED' })).toEqual({
      pause: false,
      resume: true,
      delete: true
    });
    expect(scheduleActions({ status: 'ENDED' })).toEqual({
      pause: false,
      resume: false,
      delete: true
    });
  });

  it('says the server’s sentence when it has one, else when the next run is', () => {
    const now = new Date(2026, 10, 25, 9, 0);
    expect(
      scheduleStatusLine(
        {
          status: 'ENDED',
          status_message: 'Ended after 3 failed runs in a row.',
          next_run_time: null
        },
        now
      )
    ).toBe('Ended after 3 failed runs in a row.');
    expect(
      scheduleStatusLine(
        {
          status: 'ACTIVE',
          status_message: null,
          next_run_time: new Date(2026, 10, 25, 10, 15).toISOString()
        },
        now
      )
    ).toBe(`Next run 10:15 ${zoneName(new Date(2026, 10, 25, 10, 15))}.`);
  });
});

describe('the create request from “Repeat on a schedule”', () => {
  it('repeats the job every 2 hours within a window, in the chosen zone, with its stops', () => {
    // Given the student asks for every 2 hours between 09:00 and 17:00, at most 10
    // runs, stopping after 2 failures in a row, until a date
    const result = scheduleRequest(
      JOB,
      form({
        intervalCount: '2',
        intervalUnit: 'hours',
        useWindow: true,
        windowStart: '09:00',
        windowEnd: '17:00',
        endDate: '2026-12-24T18:00',
        maxRuns: '10',
        maxFailures: '2'
      })
    );

    // Then the request carries the job as it is and each setting on the wire
    expect(result).toEqual({
      ok: true,
      request: {
        job: JOB,
        name: 'train nightly',
        timezone: 'Europe/Zurich',
        interval_seconds: 7200,
        window: { start: '09:00', end: '17:00' },
        end_time: new Date('2026-12-24T18:00').toISOString(),
        max_runs: 10,
        max_failures_in_a_row: 2
      }
    });
  });

  it('sends a cron expression with its spaces tidied, and no interval', () => {
    const result = scheduleRequest(
      JOB,
      form({ rhythm: 'cron', cron: ' 0  9 * *   1-5 ' })
    );
    expect(result.ok && result.request.cron).toBe('0 9 * * 1-5');
    expect(result.ok && result.request.interval_seconds).toBeUndefined();
  });

  it('marks each field that cannot be read, and sends nothing', () => {
    const result = scheduleRequest(
      JOB,
      form({
        intervalCount: '0',
        useWindow: true,
        windowStart: '18:00',
        windowEnd: '09:00',
        maxRuns: '-1',
        maxFailures: '1.5'
      })
    );
    expect(result.ok).toBe(false);
    expect(!result.ok && Object.keys(result.problems).sort()).toEqual([
      'max_failures_in_a_row',
      'max_runs',
      'rhythm',
      'window'
    ]);
    expect(!result.ok && result.problems.window).toContain(
      'The window ends before it starts'
    );
  });

  it('puts the server’s problems next to their fields, and forgets one when its field changes', () => {
    expect(scheduleFieldOf('cron')).toBe('rhythm');
    expect(scheduleFieldOf('interval_seconds')).toBe('rhythm');
    expect(scheduleFieldOf('window.start')).toBe('window');
    expect(scheduleFieldOf('timezone')).toBe('timezone');
    expect(scheduleFieldOf('job.flavor')).toBeNull();
    expect(scheduleFieldOf('body')).toBeNull();
    expect(
      problemsAfterEdit(
        { timezone: 'not a zone', rhythm: 'too short' },
        { timezone: 'Europe/Paris' }
      )
    ).toEqual({ rhythm: 'too short' });
  });
});

describe('a schedule of a pipeline', () => {
  it('repeats the whole pipeline, named after it, and says so in the list', () => {
    const pipeline = {
      name: 'nightly',
      stages: [
        { name: 'prepare', jobs: [{ input_path: 'prepare.ipynb' }] },
        { name: 'train', jobs: [{ input_path: 'train.ipynb' }] }
      ]
    };
    const result = pipelineScheduleRequest(
      pipeline,
      form({ intervalCount: '6' })
    );
    expect(result).toEqual({
      ok: true,
      request: {
        pipeline,
        name: 'nightly',
        timezone: 'Europe/Zurich',
        interval_seconds: 6 * 3600
      }
    });
    expect(
      scheduleTarget({ job: null, pipeline, pipeline_name: 'nightly' })
    ).toBe('pipeline “nightly” (2 stages)');
  });
});
