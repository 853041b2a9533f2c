import { ServerConnection } from '@jupyterlab/services';
import { act } from 'react';

import { DEFAULT_FEATURES, JobsAPI, UNREADABLE_JOB } from '../../common/api';
import { JobAPIError } from '../../common/errors';
import { tellMoment } from '../../common/format';
import { isSchedule } from '../runAsJobDialog';
import { ISchedule } from '../../schedules/scheduleModels';
import { makeFlavor, makeJob } from '../../__tests__/jobs.fixture';
import { settle } from '../../__tests__/jobsPanel.fixture';
import {
  CPU,
  openDialog,
  QUARTER,
  refusal,
  REPEAT,
  SlowServer
} from './runAsJobDialog.fixture';

describe('The Run as Job dialog while its flavors load', () => {
  it('keeps Submit disabled until the flavors arrive, then selects the default one', async () => {
    // Given a server that has read the notebook's parameters but not yet listed the flavors
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.parameterRequests[0].resolve([]));

    // Then the dialog says the flavors are loading, and Submit cannot be clicked
    expect(open.text('flavors-loading')).toBe('Loading the flavors…');
    expect(open.flavorOptions).toHaveLength(0);
    expect(open.submitButton.disabled).toBe(true);

    // When the flavors arrive
    await settle(() => server.flavorRequests[0].resolve([CPU, QUARTER]));

    // Then both are offered, the server's default is selected, and Submit is enabled
    expect(open.byTestId('flavors-loading')).toBeNull();
    expect(open.flavorOptions.map(option => option.dataset.flavorId)).toEqual([
      'cpu',
      'quarter-4090'
    ]);
    expect(open.checkedFlavor).toBe('quarter-4090');
    expect(open.submitButton.disabled).toBe(false);
  });

  it('keeps Submit disabled until the notebook’s parameters are read, so a quick click starts no job', async () => {
    // Given the flavors have arrived but the notebook's parameters are still being read
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.flavorRequests[0].resolve([QUARTER]));
    expect(open.checkedFlavor).toBe('quarter-4090');

    // When the student clicks Submit at once
    await open.clickSubmit();

    // Then nothing is sent: Submit is disabled while the parameters load
    expect(open.submitButton.disabled).toBe(true);
    expect(server.createRequests).toHaveLength(0);
    expect(open.closed).toBe(false);

    // When the parameters arrive and they click Submit
    await settle(() => server.parameterRequests[0].resolve([REPEAT]));
    expect(open.submitButton.disabled).toBe(false);
    await open.clickSubmit();

    // Then the job goes out with the selected flavor, and the dialog closes on it
    expect(server.createRequests).toHaveLength(1);
    expect(server.createRequests[0].request.flavor).toBe('quarter-4090');
    const job = makeJob();
    await settle(() => server.createRequests[0].answer.resolve(job));
    const result = await open.result;
    expect(result.button.accept).toBe(true);
    expect(result.value).toBe(job);
  });

  it('says why the flavors could not be listed, and Retry lists them', async () => {
    // Given a server whose flavor list fails with a sentence of its own
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.parameterRequests[0].resolve([]));
    await settle(() =>
      server.flavorRequests[0].reject(
        refusal(
          500,
          'The job flavors cannot be loaded right now (the course catalog has errors).',
          'no-catalog'
        )
      )
    );

    // Then the Flavor group shows the server's sentence and Retry, never an empty group,
    // and Submit stays disabled
    expect(open.text('flavors-error')).toContain(
      'The job flavors cannot be loaded right now (the course catalog has errors).'
    );
    expect(open.byTestId('flavors-retry')).not.toBeNull();
    expect(open.flavorOptions).toHaveLength(0);
    expect(open.submitButton.disabled).toBe(true);

    // When the student presses Retry, and the server lists the flavors this time
    await settle(() => open.byTestId('flavors-retry')!.click());
    expect(server.flavorRequests).toHaveLength(2);
    expect(open.text('flavors-loading')).toBe('Loading the flavors…');
    await settle(() => server.flavorRequests[1].resolve([QUARTER]));

    // Then the error is gone, the flavor is selected and Submit is enabled
    expect(open.byTestId('flavors-error')).toBeNull();
    expect(open.checkedFlavor).toBe('quarter-4090');
    expect(open.submitButton.disabled).toBe(false);
  });

  it('asks again by itself when the job service is briefly unavailable', async () => {
    jest.useFakeTimers();
    // Given a hub job service that answers 503 while it starts
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.parameterRequests[0].resolve([]));
    await settle(() =>
      server.flavorRequests[0].reject(
        new JobAPIError(new Response(null, { status: 503 }), null)
      )
    );

    // Then the dialog keeps loading rather than failing
    expect(open.text('flavors-loading')).toBe('Loading the flavors…');
    expect(open.byTestId('flavors-error')).toBeNull();
    expect(open.submitButton.disabled).toBe(true);

    // When a second passes, the flavors are requested again and arrive
    await act(async () => {
      await jest.advanceTimersByTimeAsync(1000);
    });
    expect(server.flavorRequests).toHaveLength(2);
    await settle(() => server.flavorRequests[1].resolve([QUARTER]));

    // Then they are offered
    expect(open.checkedFlavor).toBe('quarter-4090');
    expect(open.submitButton.disabled).toBe(false);
  });

  it('says so when no flavor is set up, and sends nothing', async () => {
    // Given a server with no job flavor at all
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.parameterRequests[0].resolve([]));
    await settle(() => server.flavorRequests[0].resolve([]));

    // Then the Flavor group says so, and Submit is disabled
    expect(open.text('flavors-none')).toContain('No job flavor is set up here');
    expect(open.submitButton.disabled).toBe(true);

    // When Enter submits the dialog anyway
    await settle(() => open.dialog.resolve());

    // Then no job is sent, and the dialog says why
    expect(server.createRequests).toHaveLength(0);
    expect(open.text('run-as-job-error')).toContain(
      'No job flavor is set up here'
    );
    expect(open.closed).toBe(false);
  });
});

describe('The GPU-hour budget in the Run as Job dialog', () => {
  it('shows what is left on each flavor with a budget, and marks a used-up one', async () => {
    // Given a course flavor with budget left, a research flavor with none left, and a CPU one
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.parameterRequests[0].resolve([]));
    const renewal = '2026-11-29T23:00:00.000Z';
    const left = makeFlavor({
      id: 'half-job',
      default: true,
      budget:
        '4.5 of your 6 GPU-hours left this week (renews Monday 00:00, Europe/Zurich)',
      budget_pattern: '4.5 of your 6 GPU-hours left this week (renews {0})',
      budget_moments: [renewal]
    });
    const spent = makeFlavor({
      id: 'two-gpus',
      budget: '0.0 of 500 GPU-hours left in Vision lab (until Thu 31 Dec 2026)',
      budget_exhausted: true
    });

    // When the flavors arrive
    await settle(() => server.flavorRequests[0].resolve([left, spent, CPU]));

    // Then each flavor with a budget says what is left, and only those
    const lines = Object.fromEntries(
      open.flavorOptions.map(option => [
        option.dataset.flavorId,
        option.querySelector<HTMLElement>('[data-testid="flavor-budget"]')
      ])
    );
    // (the renewal told in the reader's own zone, the course's words in its title)
    expect(lines['half-job']?.textContent).toBe(
      `4.5 of your 6 GPU-hours left this week (renews ${tellMoment(renewal)})`
    );
    expect(lines['half-job']?.textContent).toMatch(
      /\(renews .*\d\d:\d\d \S+\)$/
    );
    expect(lines['half-job']?.title).toBe(
      "4.5 of your 6 GPU-hours left this week (renews Monday 00:00, Europe/Zurich), the course's time"
    );
    expect(lines['half-job']?.dataset.exhausted).toBe('false');
    expect(lines['two-gpus']?.textContent).toBe(
      '0.0 of 500 GPU-hours left in Vision lab (until Thu 31 Dec 2026)'
    );
    expect(lines['two-gpus']?.dataset.exhausted).toBe('true');
    expect(lines['two-gpus']?.classList.contains('jp-mod-exhausted')).toBe(
      true
    );
    expect(lines['cpu']).toBeNull();
  });
});

describe('Submitting the Run as Job dialog', () => {
  it('shows the server’s sentence when it refuses the job, and closes once it accepts', async () => {
    // Given a loaded dialog
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.flavorRequests[0].resolve([CPU, QUARTER]));
    await settle(() => server.parameterRequests[0].resolve([]));

    // When the student submits and the server refuses
    await open.clickSubmit();
    expect(open.submitButton.disabled).toBe(true);
    expect(open.text('run-as-job-submitting')).toBe('Submitting…');
    const sentence =
      'Quarter RTX 4090 came with a course term that is not active now. Choose another flavor in the Run as Job dialog.';
    await settle(() =>
      server.createRequests[0].answer.reject(
        refusal(403, sentence, 'not-entitled')
      )
    );

    // Then the dialog stays open with the server's sentence, and Submit works again
    expect(open.text('run-as-job-error')).toBe(sentence);
    expect(open.closed).toBe(false);
    expect(open.submitButton.disabled).toBe(false);

    // When they pick the CPU flavor and submit again, and the server accepts
    await settle(() =>
      open.node
        .querySelector<HTMLInputElement>('input[name="flavor"][value="cpu"]')!
        .click()
    );
    await open.clickSubmit();
    const job = makeJob({ flavor: 'cpu' });
    await settle(() => server.createRequests[1].answer.resolve(job));

    // Then the dialog closes with the job; both tries carried the same token
    expect((await open.result).value).toBe(job);
    expect(server.createRequests[1].request.flavor).toBe('cpu');
    expect(server.createRequests[1].request.idempotency_token).toBe(
      server.createRequests[0].request.idempotency_token
    );
  });

  it('shows a sentence, not a dialog that stays open without a word, when the answer is no job', async () => {
    // Given a loaded dialog, on a server that answers the submit with an empty body
    const server = new SlowServer();
    const emptyAnswer = new JobsAPI(
      ServerConnection.makeSettings({
        baseUrl: 'http://hub.example/user/ana/',
        fetch: (async () => new Response(null, { status: 201 })) as typeof fetch
      })
    );
    server.createJob = request => emptyAnswer.createJob(request);
    const open = await openDialog(server);
    await settle(() => server.flavorRequests[0].resolve([QUARTER]));
    await settle(() => server.parameterRequests[0].resolve([]));

    // When the student submits
    await open.clickSubmit();
    await settle();

    // Then the dialog says so, and Submit can be clicked again
    expect(open.text('run-as-job-error')).toBe(UNREADABLE_JOB);
    expect(open.submitButton.disabled).toBe(false);
    expect(open.closed).toBe(false);
  });

  it('lets the student submit once they corrected a parameter', async () => {
    // Given a loaded dialog for a notebook with a `repeat` parameter
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.flavorRequests[0].resolve([QUARTER]));
    await settle(() => server.parameterRequests[0].resolve([REPEAT]));

    // When the student types a value that cannot be read, then corrects it
    await open.typeParameter('repeat', 'five');
    expect(open.node.querySelector('.jp-mod-error')).not.toBeNull();
    await open.typeParameter('repeat', '5');
    expect(open.node.querySelector('.jp-mod-error')).toBeNull();

    // Then Submit is enabled, and the job goes out with the corrected value
    expect(open.submitButton.disabled).toBe(false);
    await open.clickSubmit();
    expect(server.createRequests).toHaveLength(1);
    expect(server.createRequests[0].request.parameters).toEqual({ repeat: 5 });

    // And the dialog closes on the job
    const job = makeJob();
    await settle(() => server.createRequests[0].answer.resolve(job));
    expect((await open.result).value).toBe(job);
  });
});

describe('Whether a job would start now, in the Run as Job dialog', () => {
  it('says before submitting that a job waits behind the researcher’s own server', async () => {
    // Given a whole-GPU flavor whose only GPU the researcher's own server holds,
    // and a CPU flavor that starts at once
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.parameterRequests[0].resolve([]));
    const behind =
      'Your own server (Vision lab development share) holds the GPU this job needs, ' +
      'so the job waits in the queue and starts by itself when your server stops.';
    const whole = makeFlavor({
      id: 'whole-gpu',
      default: true,
      starts_now: false,
      forecast: behind
    });
    const cpu = makeFlavor({
      id: 'cpu-job',
      gpu: null,
      starts_now: true,
      forecast: 'Starts now: it needs no GPU.'
    });

    // When the flavors arrive
    await settle(() => server.flavorRequests[0].resolve([whole, cpu]));

    // Then each flavor says whether it would start now, the waiting one marked as such
    const lines = Object.fromEntries(
      open.flavorOptions.map(option => [
        option.dataset.flavorId,
        option.querySelector<HTMLElement>('[data-testid="flavor-forecast"]')
      ])
    );
    expect(lines['whole-gpu']?.textContent).toBe(behind);
    expect(lines['whole-gpu']?.dataset.startsNow).toBe('false');
    expect(lines['whole-gpu']?.classList.contains('jp-mod-waits')).toBe(true);
    expect(lines['cpu-job']?.textContent).toBe('Starts now: it needs no GPU.');
    expect(lines['cpu-job']?.classList.contains('jp-mod-waits')).toBe(false);
  });

  it('shows no forecast where the back end gives none (standalone)', async () => {
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.parameterRequests[0].resolve([]));
    await settle(() => server.flavorRequests[0].resolve([CPU]));
    expect(
      open.flavorOptions[0].querySelector('[data-testid="flavor-forecast"]')
    ).toBeNull();
  });
});

describe('A deadline the job cannot take', () => {
  it('is said next to its box, which is marked and focused, and nothing is sent until it is fixed', async () => {
    // Given a loaded dialog whose flavor allows at most 4 hours
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.flavorRequests[0].resolve([QUARTER]));
    await settle(() => server.parameterRequests[0].resolve([]));
    const deadline = open.node.querySelector<HTMLInputElement>(
      '[data-testid="deadline-input"]'
    )!;

    // When the student types 2 days, in minutes, and submits
    await open.typeInto(deadline, '2880');
    await open.clickSubmit();

    // Then nothing is sent, and the message stands next to the marked, focused box
    expect(server.createRequests).toHaveLength(0);
    const message = open.byTestId('deadline-error');
    expect(message?.textContent).toBe(
      'Give the deadline in whole minutes, from 1 to 240 (4 h) for this flavor.'
    );
    expect(deadline.parentElement?.contains(message!)).toBe(true);
    expect(deadline.getAttribute('aria-invalid')).toBe('true');
    expect(deadline.getAttribute('aria-describedby')).toBe(message?.id);
    expect(document.activeElement).toBe(deadline);
    expect(open.byTestId('run-as-job-error')).toBeNull();

    // When it is fixed, the mark goes and the job is submitted with that deadline
    await open.typeInto(deadline, '90');
    expect(open.byTestId('deadline-error')).toBeNull();
    expect(deadline.getAttribute('aria-invalid')).toBeNull();
    await open.clickSubmit();
    expect(server.createRequests).toHaveLength(1);
    expect(server.createRequests[0].request.deadline_seconds).toBe(90 * 60);
  });
});

describe('Notify me when it ends, in the Run as Job dialog', () => {
  it('asks the job service to mail the owner when the box is ticked', async () => {
    // Given a job service that can send finish mails
    const server = new SlowServer();
    const open = await openDialog(server, {
      ...DEFAULT_FEATURES,
      notify_email: true
    });
    await settle(() => server.flavorRequests[0].resolve([CPU, QUARTER]));
    await settle(() => server.parameterRequests[0].resolve([]));
    const box = open.byTestId('notify-email-checkbox') as HTMLInputElement;
    expect(box.checked).toBe(false);

    // When the student ticks "Notify me by mail when it ends" and submits
    await settle(() => box.click());
    await open.clickSubmit();

    // Then the job asks for a mail to its owner
    expect(server.createRequests[0].request.notify).toEqual({ email: true });
  });

  it('offers no box where no mail can be sent, and the job keeps the owner’s default', async () => {
    // Given a back end that sends no mail (standalone, or no mail server set up)
    const server = new SlowServer();
    const open = await openDialog(server);
    await settle(() => server.flavorRequests[0].resolve([CPU, QUARTER]));
    await settle(() => server.parameterRequests[0].resolve([]));

    // When the student submits
    expect(open.byTestId('notify-email-checkbox')).toBeNull();
    await open.clickSubmit();

    // Then the request carries no notification settings of its own
    expect(server.createRequests[0].request.notify).toBeUndefined();
  });
});

describe('What the Run as Job dialog made', () => {
  it('tells a job (which names its schedule, if any) from a schedule', () => {
    expect(isSchedule(makeJob({ schedule_id: null }))).toBe(false);
    expect(isSchedule(makeJob({ schedule_id: 'sched-1' }))).toBe(false);
    expect(isSchedule({ schedule_id: 'sched-1' } as ISchedule)).toBe(true);
  });
});
