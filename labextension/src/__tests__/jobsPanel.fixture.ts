/**
 * What the rendered panels' and dialogs' scenarios share: letting promises and
 * renders run out, typing into a box, a log with nothing in it yet, and the Jobs
 * panel opened at one of its tabs.
 */
import { Contents } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import { act } from 'react';

import { JobsAPI } from '../common/api';
import { JobsModel } from '../jobs/jobsModel';
import { IJobsPanelOptions, JobsPanel } from '../jobs/jobsPanel';

/**
 * Do `work` (a server's answer, a click), then let the promises and renders it
 * starts run to their end (`turns` rounds of promises).
 */
export async function settle(
  work: () => void = () => undefined,
  turns = 10
): Promise<void> {
  await act(async () => {
    work();
    for (let turn = 0; turn < turns; turn++) {
      await Promise.resolve();
    }
  });
}

/**
 * Type `text` into `input` as a user would: React listens for the input event and
 * reads the value the browser set; then let what it starts run out (`turns`).
 */
export async function typeInto(
  input: HTMLInputElement,
  text: string,
  turns = 10
): Promise<void> {
  await settle(() => {
    Object.getOwnPropertyDescriptor(
      HTMLInputElement.prototype,
      'value'
    )!.set!.call(input, text);
    input.dispatchEvent(new Event('input', { bubbles: true }));
  }, turns);
}

/**
 * The job the panel shows: its tab and the id of the job whose detail is open.
 */
export function shownJob(panel: JobsPanel): {
  tab: string;
  jobId: string | null;
} {
  return {
    tab: panel.tab,
    jobId:
      panel.node
        .querySelector('[data-testid="job-detail"]')
        ?.getAttribute('data-job-id') ?? null
  };
}

/**
 * The answer of `api/jobs/<id>/log` for a log with nothing more to read.
 */
export function emptyLog(jobId: string, offset: number) {
  return {
    job_id: jobId,
    offset,
    next_offset: offset,
    size: 0,
    data: '',
    complete: true
  };
}

/**
 * The Jobs panel over `api`, attached and showing `tab`, with the tabs' `models`.
 */
export async function openPanelTab(
  api: JobsAPI,
  tab: 'pipelines' | 'schedules',
  models: Pick<IJobsPanelOptions, 'pipelines' | 'schedules'>
): Promise<JobsPanel> {
  const panel = new JobsPanel({
    model: new JobsModel({ api }),
    ...models,
    docManager: null,
    contents: {} as Contents.IManager,
    config: null,
    trans: nullTranslator.load('jupyter_to_job')
  });
  await settle(() => {
    Widget.attach(panel, document.body);
    panel.showTab(tab);
    MessageLoop.sendMessage(panel, Widget.Msg.UpdateRequest);
  });
  await settle();
  return panel;
}
