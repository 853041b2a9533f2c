/**
 * The Run as Job dialog's scenarios that make a schedule or rerun an earlier job
 * (loading, budgets, submitting and notifications: runAsJobDialog.spec.tsx).
 */

import { DEFAULT_FEATURES } from '../../common/api';
import { JobAPIError } from '../../common/errors';
import { ISchedule } from '../../schedules/scheduleModels';
import { makeJob } from '../../__tests__/jobs.fixture';
import { settle } from '../../__tests__/jobsPanel.fixture';
import {
  CPU,
  OpenDialog,
  openDialog,
  QUARTER,
  REPEAT,
  SlowServer
} from './runAsJobDialog.fixture';

describe('Repeat on a schedule, in the Run as Job dialog', () => {
  async function readyDialog(server: SlowServer): Promise<OpenDialog> {
    const open = await openDialog(server);
    await settle(() => server.flavorRequests[0].resolve([CPU, QUARTER]));
    await settle(() => server.parameterRequests[0].resolve([]));
    await settle(() =>
      (open.byTestId('schedule-repeat-checkbox') as HTMLInputElement).click()
    );
    return open;
  }

  const input = (open: OpenDialog, id: string) =>
    open.byTestId(id) as HTMLInputElement;

  it('makes a schedule instead of a job: every 30 minutes within a window, with its stops', async () => {
    // Given the student ticks "Repeat on a schedule"
    const server = new SlowServer();
    const open = await readyDialog(server);
    expect(open.submitButton.textContent).toBe('Create Schedule');
    // (the time zone starts as the browser's)
    expect(input(open, 'schedule-timezone').value).toBe(
      Intl.DateTimeFormat().resolvedOptions().timeZone
    );

    // When they ask for every 30 minutes between 09:00 and 17:00, at most 20 runs,
    // stopping after 2 failures in a row, in Taipei time, and submit
    await open.typeInto(input(open, 'schedule-interval-count'), '30');
    await settle(() => {
      const unit = open.byTestId('schedule-interval-unit') as HTMLSelectElement;
      unit.value = 'minutes';
      unit.dispatchEvent(new Event('change', { bubbles: true }));
    });
    await settle(() => input(open, 'schedule-use-window').click());
    await open.typeInto(input(open, 'schedule-window-start'), '09:00');
    await open.typeInto(input(open, 'schedule-window-end'), '17:00');
    await open.typeInto(input(open, 'schedule-timezone'), 'Asia/Taipei');
    await open.typeInto(input(open, 'schedule-max-runs'), '20');
    await open.typeInto(input(open, 'schedule-max-failures'), '2');
    expect(open.text('schedule-preview')).toBe(
      'Runs: Every 30 minutes, between 09:00 and 17:00 (Asia/Taipei).'
    );
    await open.clickSubmit();

    // Then a schedule is asked for, with the job as the form has it, and no job
    expect(server.createRequests).toHaveLength(0);
    expect(server.scheduleRequests).toHaveLength(1);
    const { request } = server.scheduleRequests[0];
    expect(request).toMatchObject({
      interval_seconds: 1800,
      window: { start: '09:00', end: '17:00' },
      timezone: 'Asia/Taipei',
      max_runs: 20,
      max_failures_in_a_row: 2
    });
    expect(request.cron).toBeUndefined();
    expect(request.job?.input_path).toBe('course/train.ipynb');
    expect(request.job?.flavor).toBe('quarter-4090');

    // And the dialog closes on the schedule the server made
    const schedule = { schedule_id: 's-1' } as ISchedule;
    await settle(() => server.scheduleRequests[0].answer.resolve(schedule));
    const result = await open.result;
    expect(result.button.accept).toBe(true);
    expect(result.value).toBe(schedule);
  });

  it('shows each problem the server found next to its field, and keeps the dialog open', async () => {
    // Given a server that refuses the cron expression and the time zone
    const server = new SlowServer();
    const open = await readyDialog(server);
    await settle(() => input(open, 'schedule-rhythm-cron').click());
    await open.typeInto(input(open, 'schedule-cron'), '61 * * * *');
    await open.typeInto(input(open, 'schedule-timezone'), 'Mars/Olympus');
    await open.clickSubmit();
    expect(server.scheduleRequests[0].request.cron).toBe('61 * * * *');
    await settle(() =>
      server.scheduleRequests[0].answer.reject(
        new JobAPIError(new Response(null, { status: 400 }), {
          message: 'The schedule has errors: cron: …; timezone: ….',
          reason: 'invalid',
          errors: [
            {
              field: 'cron',
              message: "'61 * * * *' is not a cron expression; give five fields"
            },
            {
              field: 'timezone',
              message: "'Mars/Olympus' is not a time zone; use an IANA name"
            },
            { field: 'job.flavor', message: 'is not a flavor of yours' }
          ]
        })
      )
    );

    // Then each field shows its own problem and is marked; the rest is listed
    expect(open.closed).toBe(false);
    expect(open.text('schedule-error-rhythm')).toBe(
      "'61 * * * *' is not a cron expression; give five fields"
    );
    const zone = input(open, 'schedule-timezone');
    expect(open.text('schedule-error-timezone')).toBe(
      "'Mars/Olympus' is not a time zone; use an IANA name"
    );
    expect(zone.getAttribute('aria-invalid')).toBe('true');
    expect(zone.getAttribute('aria-describedby')).toBe(
      open.byTestId('schedule-error-timezone')?.id
    );
    const listed = [
      ...open.node.querySelectorAll('[data-testid="run-as-job-error"] li')
    ].map(item => item.textContent);
    expect(listed).toEqual(['job.flavor: is not a flavor of yours']);

    // When the student corrects the time zone, its mark goes and the cron's stays
    await open.typeInto(zone, 'Europe/Paris');
    expect(open.byTestId('schedule-error-timezone')).toBeNull();
    expect(zone.getAttribute('aria-invalid')).toBeNull();
    expect(open.byTestId('schedule-error-rhythm')).not.toBeNull();
  });

  it('checks the form before sending: a window that ends before it starts is marked', async () => {
    const server = new SlowServer();
    const open = await readyDialog(server);
    await settle(() => input(open, 'schedule-use-window').click());
    await open.typeInto(input(open, 'schedule-window-start'), '18:00');
    await open.typeInto(input(open, 'schedule-window-end'), '08:00');
    await open.clickSubmit();

    expect(server.scheduleRequests).toHaveLength(0);
    expect(open.text('schedule-error-window')).toContain(
      'The window ends before it starts'
    );
  });

  it('outlines only the Every box when its value is wrong, not the cron box beside it', async () => {
    // Given "Every" chosen, with 0 minutes in its box
    const server = new SlowServer();
    const open = await readyDialog(server);
    await open.typeInto(input(open, 'schedule-interval-count'), '0');

    // When the student submits
    await open.clickSubmit();

    // Then the problem is said, and only the Every box is outlined in red
    expect(server.scheduleRequests).toHaveLength(0);
    expect(open.text('schedule-error-rhythm')).not.toBe('');
    const every = input(open, 'schedule-interval-count');
    const cron = input(open, 'schedule-cron');
    expect(every.classList.contains('jp-mod-error')).toBe(true);
    expect(every.getAttribute('aria-invalid')).toBe('true');
    expect(cron.classList.contains('jp-mod-error')).toBe(false);
    expect(cron.getAttribute('aria-invalid')).toBeNull();
  });
});

describe('Rerun: the Run as Job dialog filled from an earlier job', () => {
  const RUN = {
    ...REPEAT,
    name: 'run',
    inferred_type_name: 'str',
    default: "'a'"
  };

  it('starts from the job’s snapshot, flavor, deadline and values, under the next free name, and sends the changed values', async () => {
    // Given a finished job "loop run1" on the CPU flavor with run='run1', and a rerun of it
    const job = makeJob({
      job_id: 'job-1',
      name: 'loop run1',
      input_path: 'course/loop.ipynb',
      flavor: 'cpu',
      deadline_seconds: 1200,
      output_formats: ['ipynb'],
      cell_timeout_seconds: 60,
      kernel_name: 'python3',
      parameters: { run: 'run1', seed: 7 }
    });
    const server = new SlowServer();
    // When its owner presses Rerun (a "loop run1 (2)" exists already)
    const open = await openDialog(server, DEFAULT_FEATURES, {
      job,
      takenNames: ['loop run1', 'loop run1 (2)']
    });
    await settle(() => server.flavorRequests[0].resolve([CPU, QUARTER]));
    await settle(() => server.parameterRequests[0].resolve([RUN, REPEAT]));

    // Then the dialog reads the parameters of the job's own snapshot, not the file's
    expect(server.jobParameterRequests).toEqual(['job-1']);
    expect(open.node.querySelector('.jp-Dialog-header')?.textContent).toContain(
      'Run “loop run1” again'
    );
    expect(open.text('run-as-job-note')).toContain(
      'course/loop.ipynb as “loop run1” ran it'
    );
    // with the next free name, the job's flavor (not the default) and deadline
    const name = open.node.querySelector<HTMLInputElement>(
      'input[name="job-name"]'
    )!;
    expect(name.value).toBe('loop run1 (3)');
    expect(open.checkedFlavor).toBe('cpu');
    expect(
      open.node.querySelector<HTMLInputElement>(
        '[data-testid="deadline-input"]'
      )!.value
    ).toBe('20');
    // the job's values in the boxes, and no HTML copy since the job kept none
    const box = (parameter: string) =>
      open.node.querySelector<HTMLInputElement>(
        `[data-testid="parameter-input"][data-parameter="${parameter}"]`
      )!.value;
    expect([box('run'), box('repeat')]).toEqual(['run1', '3']);
    expect(
      open.node.querySelector<HTMLInputElement>(
        '[data-testid="html-output-checkbox"]'
      )!.checked
    ).toBe(false);
    // and no "Repeat on a schedule": a rerun is one job
    expect(open.byTestId('schedule-repeat-checkbox')).toBeNull();

    // When the person changes a parameter and submits
    await open.typeParameter('run', 'run2');
    await open.clickSubmit();

    // Then the new job reruns the old one's snapshot with the new value, its other
    // values, limits and kernel, under its own name
    expect(server.createRequests).toHaveLength(1);
    const sent = server.createRequests[0].request;
    expect(sent).toMatchObject({
      input_path: 'course/loop.ipynb',
      name: 'loop run1 (3)',
      flavor: 'cpu',
      parameters: { run: 'run2', seed: 7 },
      deadline_seconds: 1200,
      output_formats: ['ipynb'],
      rerun_of: 'job-1',
      cell_timeout_seconds: 60,
      kernel_name: 'python3'
    });
  });
});
