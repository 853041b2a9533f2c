/**
 * What the Run as Job dialog's scenarios share: a job service that answers when the
 * test says, the dialog opened over it, what the user sees of the dialog, and no
 * dialog left open after a scenario.
 */
import { Dialog } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { PromiseDelegate } from '@lumino/coreutils';
import { act } from 'react';

import { DEFAULT_FEATURES, JobsAPI } from '../../common/api';
import { JobAPIError } from '../../common/errors';
import {
  ICreateJob,
  IDescribeJob,
  IJobFlavorInfo,
  INotebookParameter
} from '../../common/models';
import { RunAsJobDialog, RunAsJobResult } from '../runAsJobDialog';
import { ICreateSchedule, ISchedule } from '../../schedules/scheduleModels';
import { makeFlavor } from '../../__tests__/jobs.fixture';
import { settle, typeInto } from '../../__tests__/jobsPanel.fixture';

// React renders the dialog inside act(), as in a browser between two events.
(
  globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }
).IS_REACT_ACT_ENVIRONMENT = true;

// Each scenario starts with no dialog open and the real clock.
afterEach(async () => {
  await act(async () => Dialog.flush());
  jest.useRealTimers();
});

export const CPU = makeFlavor({
  id: 'cpu',
  title: 'CPU job',
  gpu: null,
  default: false,
  default_deadline_seconds: 3600,
  max_deadline_seconds: 24 * 3600
});
export const QUARTER = makeFlavor({ id: 'quarter-4090', default: true });

export const REPEAT: INotebookParameter = {
  name: 'repeat',
  inferred_type_name: 'None',
  default: '3',
  help: ''
};

/**
 * The job API of a server that answers when the test says: each call waits on a
 * promise the test resolves or rejects.
 */
export class SlowServer {
  readonly flavorRequests: PromiseDelegate<IJobFlavorInfo[]>[] = [];
  readonly parameterRequests: PromiseDelegate<INotebookParameter[]>[] = [];
  readonly createRequests: {
    request: ICreateJob;
    answer: PromiseDelegate<IDescribeJob>;
  }[] = [];

  listFlavors(): Promise<IJobFlavorInfo[]> {
    return this._wait(this.flavorRequests);
  }

  getParameters(): Promise<INotebookParameter[]> {
    return this._wait(this.parameterRequests);
  }

  readonly jobParameterRequests: string[] = [];

  getJobParameters(jobId: string): Promise<INotebookParameter[]> {
    this.jobParameterRequests.push(jobId);
    return this._wait(this.parameterRequests);
  }

  createJob(request: ICreateJob): Promise<IDescribeJob> {
    const answer = new PromiseDelegate<IDescribeJob>();
    this.createRequests.push({ request, answer });
    return answer.promise;
  }

  readonly scheduleRequests: {
    request: ICreateSchedule;
    answer: PromiseDelegate<ISchedule>;
  }[] = [];

  createSchedule(request: ICreateSchedule): Promise<ISchedule> {
    const answer = new PromiseDelegate<ISchedule>();
    this.scheduleRequests.push({ request, answer });
    return answer.promise;
  }

  get api(): JobsAPI {
    return this as unknown as JobsAPI;
  }

  private _wait<T>(requests: PromiseDelegate<T>[]): Promise<T> {
    const answer = new PromiseDelegate<T>();
    requests.push(answer);
    return answer.promise;
  }
}

/**
 * An error answer of the job API.
 */
export function refusal(
  status: number,
  message: string,
  reason: string
): JobAPIError {
  return new JobAPIError(new Response(null, { status }), { message, reason });
}

/**
 * The Run as Job dialog, open in the page, and what the user sees of it.
 */
export class OpenDialog {
  constructor(
    readonly dialog: RunAsJobDialog,
    readonly result: Promise<Dialog.IResult<RunAsJobResult | null>>
  ) {
    result.then(
      () => (this.closed = true),
      () => (this.closed = true)
    );
  }

  closed = false;

  get node(): HTMLElement {
    return this.dialog.node;
  }

  get submitButton(): HTMLButtonElement {
    return this.node.querySelector('.jp-JupyterToJob-submit')!;
  }

  get flavorOptions(): HTMLElement[] {
    return [
      ...this.node.querySelectorAll<HTMLElement>(
        '[data-testid="flavor-option"]'
      )
    ];
  }

  get checkedFlavor(): string | null {
    return (
      this.node.querySelector<HTMLInputElement>('input[name="flavor"]:checked')
        ?.value ?? null
    );
  }

  byTestId(id: string): HTMLElement | null {
    return this.node.querySelector(`[data-testid="${id}"]`);
  }

  text(id: string): string {
    return this.byTestId(id)?.textContent ?? '';
  }

  /**
   * Click Submit as a user would (a disabled button takes no click).
   */
  async clickSubmit(): Promise<void> {
    await settle(() => this.submitButton.click());
  }

  /**
   * Type `text` into the box of the parameter `name`.
   */
  async typeParameter(name: string, text: string): Promise<void> {
    await this.typeInto(
      this.node.querySelector<HTMLInputElement>(
        `[data-testid="parameter-input"][data-parameter="${name}"]`
      )!,
      text
    );
  }

  async typeInto(input: HTMLInputElement, text: string): Promise<void> {
    await typeInto(input, text);
  }
}

export async function openDialog(
  server: SlowServer,
  features = DEFAULT_FEATURES,
  rerun: { job: IDescribeJob; takenNames: string[] } | null = null
): Promise<OpenDialog> {
  const dialog = new RunAsJobDialog({
    api: server.api,
    path: rerun?.job.input_path ?? 'course/train.ipynb',
    rerun: rerun?.job ?? null,
    takenNames: rerun?.takenNames ?? [],
    config: {
      mode: 'standalone',
      version: '0.1.0',
      features,
      max_notebook_bytes: 1024 * 1024
    },
    trans: nullTranslator.load('jupyterlab')
  });
  let result: Promise<Dialog.IResult<RunAsJobResult | null>> | null = null;
  await settle(() => {
    result = dialog.launch();
  });
  return new OpenDialog(dialog, result!);
}
