/**
 * The pipeline builder and the template dialog as a user drives them: the open
 * notebooks arranged into stages, a flavor and parameters per job, pipeline-wide
 * values, Run and Save as Template; a saved template run again with new values.
 */
import { Dialog } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { PromiseDelegate } from '@lumino/coreutils';
import { act } from 'react';

import { DEFAULT_FEATURES, JobsAPI } from '../../common/api';
import { JobAPIError } from '../../common/errors';
import { INotebookParameter } from '../../common/models';
import {
  PipelineBuilderDialog,
  PipelineBuilderResult
} from '../pipelineBuilder';
import {
  ICreatePipeline,
  IDescribePipeline,
  PipelineTemplateRun
} from '../pipelineModels';
import { PipelineTemplateDialog } from '../pipelineTemplateDialog';
import { ICreateSchedule, ISchedule } from '../../schedules/scheduleModels';
import { makeFlavor } from '../../__tests__/jobs.fixture';
import {
  settle as settleTurns,
  typeInto as typeText
} from '../../__tests__/jobsPanel.fixture';
import {
  EPOCHS,
  makeFailedPipeline,
  nightlyRequest,
  OPEN_NOTEBOOKS
} from '../../__tests__/pipelines.fixture';

(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

const CPU = makeFlavor({ id: 'cpu', title: 'CPU job', gpu: null });
const QUARTER = makeFlavor({ id: 'quarter-4090', default: true });

/**
 * A job API whose answers the test gives when it wants.
 */
class Server {
  readonly created: {
    request: ICreatePipeline | PipelineTemplateRun;
    answer: PromiseDelegate<IDescribePipeline>;
  }[] = [];
  readonly saved: {
    path: string;
    pipeline: ICreatePipeline;
    overwrite: boolean;
    answer: PromiseDelegate<{ path: string; size: number }>;
  }[] = [];
  template = new PromiseDelegate<ICreatePipeline>();

  async listFlavors() {
    return [CPU, QUARTER];
  }
  /**
   * Holds the parameter answers back until it resolves (a slow server).
   */
  parametersGate: Promise<void> = Promise.resolve();
  async getParameters(path: string): Promise<INotebookParameter[]> {
    await this.parametersGate;
    return path.endsWith('train.ipynb') ? [EPOCHS] : [];
  }
  createPipeline(request: ICreatePipeline | PipelineTemplateRun) {
    const answer = new PromiseDelegate<IDescribePipeline>();
    this.created.push({ request, answer });
    return answer.promise;
  }
  savePipelineTemplate(
    path: string,
    pipeline: ICreatePipeline,
    overwrite: boolean
  ) {
    const answer = new PromiseDelegate<{ path: string; size: number }>();
    this.saved.push({ path, pipeline, overwrite, answer });
    return answer.promise;
  }
  readonly schedules: ICreateSchedule[] = [];
  /**
   * The job service's refusal of the next schedule, if any.
   */
  scheduleRefusal: JobAPIError | null = null;
  async createSchedule(request: ICreateSchedule) {
    this.schedules.push(request);
    if (this.scheduleRefusal) {
      throw this.scheduleRefusal;
    }
    return { schedule_id: 'sched-1' } as ISchedule;
  }
  getPipelineTemplate(): Promise<ICreatePipeline> {
    return this.template.promise;
  }
  get api(): JobsAPI {
    return this as unknown as JobsAPI;
  }
}

// The builder reads every notebook's parameters: more rounds of promises to settle.
const settle = (work?: () => void) => settleTurns(work, 20);

const typeInto = (input: HTMLInputElement, text: string) =>
  typeText(input, text, 20);

function choose(select: HTMLSelectElement, value: string): Promise<void> {
  return settle(() => {
    select.value = value;
    select.dispatchEvent(new Event('change', { bubbles: true }));
  });
}

async function openBuilder(server: Server, features = DEFAULT_FEATURES) {
  const dialog = new PipelineBuilderDialog({
    api: server.api,
    notebooks: OPEN_NOTEBOOKS,
    features,
    trans: nullTranslator.load('jupyter_to_job')
  });
  let result: Promise<Dialog.IResult<PipelineBuilderResult | null>> | null =
    null;
  await settle(() => {
    result = dialog.launch();
  });
  await settle();
  // A dialog left open is flushed after the test: its promise then rejects.
  (result as unknown as Promise<unknown>).catch(() => undefined);
  const node = dialog.node;
  const one = <T extends HTMLElement>(selector: string) =>
    node.querySelector<T>(selector)!;
  const all = (selector: string) => [
    ...node.querySelectorAll<HTMLElement>(selector)
  ];
  return { dialog, result: result!, node, one, all };
}

afterEach(async () => {
  await act(async () => Dialog.flush());
});

describe('The pipeline builder', () => {
  it('runs the open notebooks as stages: two side by side, each job with its flavor and parameters, and pipeline-wide values', async () => {
    const server = new Server();
    const { one, all, result } = await openBuilder(server);
    // Given the three open notebooks, one stage each
    expect(all('[data-testid="builder-stage"]')).toHaveLength(3);

    // When the student moves eval into train's stage
    await choose(
      one<HTMLSelectElement>(
        '[data-testid="builder-stage-picker"][data-path="course/eval.ipynb"]'
      ),
      '1'
    );
    // Then two stages remain, the second running train and eval side by side
    expect(
      all('[data-testid="builder-stage"]').map(stage =>
        [
          ...stage.querySelectorAll<HTMLElement>('[data-testid="builder-job"]')
        ].map(job => job.dataset.path)
      )
    ).toEqual([
      ['course/prepare.ipynb'],
      ['course/train.ipynb', 'course/eval.ipynb']
    ]);

    // When she picks train, gives it the CPU flavor and 10 epochs
    await settle(() =>
      one(
        '[data-testid="builder-job"][data-path="course/train.ipynb"] [data-testid="builder-job-select"]'
      ).click()
    );
    const settings = one('[data-testid="builder-job-settings"]');
    expect(settings.dataset.path).toBe('course/train.ipynb');
    await settle(() =>
      settings
        .querySelector<HTMLInputElement>('input[name="flavor"][value="cpu"]')!
        .click()
    );
    await typeInto(
      settings.querySelector<HTMLInputElement>(
        '[data-testid="parameter-input"][data-parameter="epochs"]'
      )!,
      '10'
    );
    // And names the pipeline and adds a pipeline-wide seed
    await typeInto(one('[data-testid="builder-name"]'), 'nightly');
    await settle(() => one('[data-testid="wide-parameter-add"]').click());
    await typeInto(one('[data-testid="wide-parameter-name"]'), 'seed');
    await typeInto(one('[data-testid="wide-parameter-value"]'), '42');
    // And clicks Run
    await settle(() =>
      one<HTMLButtonElement>('.jp-JupyterToJob-submit').click()
    );

    // Then the pipeline goes out as arranged
    expect(server.created).toHaveLength(1);
    expect(server.created[0].request).toEqual(
      nightlyRequest('2-train', 'cpu', { seed: 42 })
    );
    // And the dialog closes on the pipeline the server made
    const pipeline = makeFailedPipeline({ status: 'RUNNING' });
    await settle(() => server.created[0].answer.resolve(pipeline));
    const closed = await result;
    expect(closed.button.accept).toBe(true);
    expect(closed.value).toBe(pipeline);
  });

  it('waits for the notebooks’ parameters when Run is clicked early, then runs', async () => {
    // Given a server still reading the notebooks' parameters
    const server = new Server();
    const gate = new PromiseDelegate<void>();
    server.parametersGate = gate.promise;
    const { one } = await openBuilder(server);

    // When the student clicks Run at once
    await settle(() =>
      one<HTMLButtonElement>('.jp-JupyterToJob-submit').click()
    );

    // Then nothing is sent and nothing is refused yet
    expect(server.created).toHaveLength(0);
    expect(one('[data-testid="builder-error"]')).toBeNull();

    // When the parameters arrive, the pipeline goes out
    await settle(() => gate.resolve());
    expect(server.created).toHaveLength(1);
  });

  it('repeats the pipeline on a schedule instead of running it once', async () => {
    const server = new Server();
    const { one, dialog, result } = await openBuilder(server);
    await typeInto(one('[data-testid="builder-name"]'), 'nightly');

    // When the student ticks "Repeat on a schedule", asks for 02:00 every day
    await settle(() => one('[data-testid="schedule-repeat-checkbox"]').click());
    expect(one('.jp-JupyterToJob-submit').textContent).toBe('Create Schedule');
    await settle(() => one('[data-testid="schedule-rhythm-cron"]').click());
    await typeInto(one('[data-testid="schedule-cron"]'), '0 2 * * *');
    await typeInto(one('[data-testid="schedule-timezone"]'), 'Asia/Taipei');
    await settle(() =>
      one<HTMLButtonElement>('.jp-JupyterToJob-submit').click()
    );

    // Then a schedule of the pipeline is made, and no pipeline runs now
    expect(server.created).toHaveLength(0);
    expect(server.schedules).toHaveLength(1);
    const [request] = server.schedules;
    expect(request).toMatchObject({
      name: 'nightly',
      cron: '0 2 * * *',
      timezone: 'Asia/Taipei'
    });
    expect(request.job).toBeUndefined();
    expect(request.pipeline?.name).toBe('nightly');
    expect(request.pipeline?.stages).toHaveLength(3);
    expect((await result).value).toEqual({ schedule_id: 'sched-1' });
    expect(dialog.isDisposed).toBe(true);
  });

  it('shows each of the schedule’s problems next to its field, two on one field together', async () => {
    // Given a job service that refuses the schedule: its start and its end (both told at
    // the end date's field, as the Run as Job dialog tells them), and a pipeline problem
    const server = new Server();
    server.scheduleRefusal = new JobAPIError(
      new Response(null, { status: 400 }),
      {
        message: 'The schedule is not valid.',
        reason: 'invalid',
        errors: [
          { field: 'start_time', message: 'The start is in the past.' },
          { field: 'end_time', message: 'The end is before the start.' },
          { field: 'pipeline.name', message: 'Name the pipeline.' }
        ]
      }
    );
    const { one } = await openBuilder(server);
    await typeInto(one('[data-testid="builder-name"]'), 'nightly');
    await settle(() => one('[data-testid="schedule-repeat-checkbox"]').click());
    await settle(() => one('[data-testid="schedule-rhythm-cron"]').click());
    await typeInto(one('[data-testid="schedule-cron"]'), '0 2 * * *');

    // When she creates the schedule
    await settle(() =>
      one<HTMLButtonElement>('.jp-JupyterToJob-submit').click()
    );

    // Then both problems of the end date's field stand next to it, and the pipeline's in
    // the list
    expect(one('[data-testid="schedule-error-end_time"]').textContent).toBe(
      'The start is in the past. The end is before the start.'
    );
    const listed = one('[data-testid="builder-error"]').textContent ?? '';
    expect(listed).toContain('Name the pipeline.');
    expect(listed).not.toContain('The start is in the past.');
  });

  it('asks for one mail when the pipeline ends, where the job service can send it', async () => {
    const server = new Server();
    const { one } = await openBuilder(server, {
      ...DEFAULT_FEATURES,
      notify_email: true
    });
    await settle(() => one('[data-testid="notify-email-checkbox"]').click());
    await settle(() =>
      one<HTMLButtonElement>('.jp-JupyterToJob-submit').click()
    );
    expect((server.created[0].request as ICreatePipeline).notify).toEqual({
      email: true
    });
  });

  it('offers no mail where none can be sent, and asks for none', async () => {
    const server = new Server();
    const { one } = await openBuilder(server);
    expect(one('[data-testid="notify-email-checkbox"]')).toBeNull();
    await settle(() =>
      one<HTMLButtonElement>('.jp-JupyterToJob-submit').click()
    );
    expect(
      (server.created[0].request as ICreatePipeline).notify
    ).toBeUndefined();
  });

  it('saves the arrangement as a template beside the notebooks, and asks before replacing one', async () => {
    const server = new Server();
    const { one, result } = await openBuilder(server);
    let closed = false;
    void result.then(
      () => (closed = true),
      () => (closed = true)
    );
    await typeInto(one('[data-testid="builder-name"]'), 'Train and evaluate');

    // When she clicks Save as Template
    await settle(() =>
      one<HTMLButtonElement>('.jp-JupyterToJob-saveTemplate').click()
    );
    // Then the template is written beside the notebooks, not over another one
    expect(server.saved).toHaveLength(1);
    expect(server.saved[0].path).toBe(
      'course/train-and-evaluate.pipeline.yaml'
    );
    expect(server.saved[0].overwrite).toBe(false);
    expect(server.saved[0].pipeline.stages).toHaveLength(3);

    // When the file exists already, she is told, and a second click replaces it
    await settle(() =>
      server.saved[0].answer.reject(
        new JobAPIError(new Response(null, { status: 409 }), {
          message: 'course/train-and-evaluate.pipeline.yaml exists.',
          reason: 'exists'
        })
      )
    );
    expect(one('[data-testid="builder-error"]').textContent).toContain(
      'Press Save as Template again to replace it'
    );
    await settle(() =>
      one<HTMLButtonElement>('.jp-JupyterToJob-saveTemplate').click()
    );
    expect(server.saved[1].overwrite).toBe(true);
    await settle(() =>
      server.saved[1].answer.resolve({
        path: 'course/train-and-evaluate.pipeline.yaml',
        size: 300
      })
    );
    // Then it says where, and the builder stays open to Run
    expect(one('[data-testid="builder-saved"]').textContent).toContain(
      'Saved as course/train-and-evaluate.pipeline.yaml'
    );
    expect(closed).toBe(false);
    expect(server.created).toHaveLength(0);
  });
});

describe('Running a saved pipeline template', () => {
  it('shows its stages and prefilled pipeline-wide values, and runs it with the new ones', async () => {
    const server = new Server();
    const dialog = new PipelineTemplateDialog({
      api: server.api,
      path: 'course/nightly.pipeline.yaml',
      trans: nullTranslator.load('jupyter_to_job')
    });
    let result: Promise<Dialog.IResult<IDescribePipeline | null>> | null = null;
    await settle(() => {
      result = dialog.launch();
    });
    await settle(() =>
      server.template.resolve({
        name: 'nightly',
        stages: [
          { name: 'prepare', jobs: [{ input_path: 'course/prepare.ipynb' }] },
          {
            name: 'train',
            jobs: [{ input_path: 'course/train.ipynb', flavor: 'cpu' }]
          }
        ],
        parameters: { epochs: 3, optimizer: 'adam' }
      })
    );
    const node = dialog.node;
    expect(
      node.querySelector('[data-testid="template-stages"]')?.textContent
    ).toBe('prepare: course/prepare.ipynbtrain: course/train.ipynb on CPU job');
    const values = [
      ...node.querySelectorAll<HTMLInputElement>(
        '[data-testid="wide-parameter-value"]'
      )
    ];
    expect(values.map(input => [input.dataset.parameter, input.value])).toEqual(
      [
        ['epochs', '3'],
        ['optimizer', 'adam']
      ]
    );

    // When the student sets 5 epochs and runs it
    await typeInto(values[0], '5');
    await settle(() =>
      node.querySelector<HTMLButtonElement>('.jp-JupyterToJob-submit')!.click()
    );

    // Then the template runs with the new value in place of its own
    expect(server.created[0].request).toEqual({
      template_path: 'course/nightly.pipeline.yaml',
      parameters: { epochs: 5, optimizer: 'adam' }
    });
    const pipeline = makeFailedPipeline({ status: 'RUNNING' });
    await settle(() => server.created[0].answer.resolve(pipeline));
    expect((await result!).value).toBe(pipeline);
  });
});
