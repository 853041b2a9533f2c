/**
 * The Jobs panel as rendered: an instructor's list with a student's job, and a
 * student's own list.
 */
import { nullTranslator } from '@jupyterlab/translation';
import * as React from 'react';
import { act } from 'react';
import { ReactWidget } from '@jupyterlab/ui-components';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { DEFAULT_FEATURES, JobsAPI } from '../../common/api';
import { JobsModel } from '../jobsModel';
import { IJobActions, JobsView } from '../jobsView';
import { IDescribeJob } from '../../common/models';
import { listedJobs, makeJob } from '../../__tests__/jobs.fixture';
import { emptyLog } from '../../__tests__/jobsPanel.fixture';

// React's act() outside a test renderer
(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

const NO_ACTIONS: IJobActions = {
  stop: () => undefined,
  remove: () => undefined,
  rerun: () => undefined,
  openNotebook: () => undefined,
  downloadHtml: () => undefined
};

/**
 * The panel over a job API that lists `jobs`, with the first one selected.
 */
async function renderPanel(
  jobs: IDescribeJob[],
  actions: IJobActions = NO_ACTIONS
): Promise<{ node: HTMLElement; widget: Widget; model: JobsModel }> {
  const api = {
    listRecentJobs: async () => ({
      jobs,
      next_token: null,
      total_count: jobs.length
    }),
    getLog: async (jobId: string, offset: number) => emptyLog(jobId, offset)
  };
  const model = new JobsModel({ api: api as unknown as JobsAPI });
  await model.refresh();
  model.select(jobs[0].job_id);
  const widget = ReactWidget.create(
    <JobsView
      model={model}
      features={DEFAULT_FEATURES}
      actions={actions}
      trans={nullTranslator.load('jupyter_to_job')}
    />
  );
  await act(async () => {
    Widget.attach(widget, document.body);
    MessageLoop.sendMessage(widget, Widget.Msg.UpdateRequest);
  });
  return { node: widget.node, widget, model };
}

const byTestId = (node: HTMLElement, id: string) =>
  Array.from(node.querySelectorAll(`[data-testid="${id}"]`));

describe('JobsView: only the actions the viewer may take', () => {
  let cleanup: (() => void) | null = null;
  afterEach(() => {
    cleanup?.();
    cleanup = null;
  });

  it('shows an instructor a student’s job with its owner, and no Stop, Delete or Rerun', async () => {
    // Given an instructor's list: a student's finished job and one of their own
    const students = makeJob({
      job_id: 'student-job',
      owner: 'bob',
      own: false,
      can_stop: false,
      can_delete: false,
      can_rerun: false,
      flavor: 'whole-gpu',
      flavor_title: 'One whole GPU'
    });
    const mine = makeJob({ job_id: 'my-job', owner: 'ines' });
    const { node, widget, model } = await renderPanel([students, mine]);
    cleanup = () => {
      act(() => widget.dispose());
      model.dispose();
    };

    // Then the table has an Owner column naming each job's owner
    expect(byTestId(node, 'jobs-owner-header')).toHaveLength(1);
    expect(
      byTestId(node, 'job-owner')
        .map(cell => cell.textContent)
        .sort()
    ).toEqual(['bob', 'ines (you)']);
    // And the flavor by its title
    expect(
      node.querySelector('[data-job-id="student-job"]')?.textContent
    ).toContain('One whole GPU');
    // And the student's job's detail names its owner and offers no action of theirs
    expect(byTestId(node, 'job-detail-owner')[0].textContent).toBe('bob');
    expect(byTestId(node, 'job-not-yours')[0].textContent).toContain(
      'This is bob’s job'
    );
    for (const action of ['stop', 'delete', 'rerun']) {
      expect(byTestId(node, `job-action-${action}`)).toHaveLength(0);
    }
    // while what reading allows is still there
    expect(byTestId(node, 'job-action-open-notebook')).toHaveLength(1);
  });

  it('shows a student their own jobs without an Owner column, with Delete and Rerun', async () => {
    const { node, widget, model } = await renderPanel([
      makeJob({ job_id: 'a' }),
      makeJob({ job_id: 'b', status: 'FAILED' })
    ]);
    cleanup = () => {
      act(() => widget.dispose());
      model.dispose();
    };

    expect(byTestId(node, 'jobs-owner-header')).toHaveLength(0);
    expect(byTestId(node, 'job-owner')).toHaveLength(0);
    expect(byTestId(node, 'job-not-yours')).toHaveLength(0);
    expect(byTestId(node, 'job-action-delete')).toHaveLength(1);
    expect(byTestId(node, 'job-action-rerun')).toHaveLength(1);
  });
});

describe('JobsView: a job and its reruns link each other', () => {
  it('shows a rerun its original and the original its reruns, and a click shows that job', async () => {
    // Given "loop run1" and two reruns of it, one under a name typed by its owner
    const [original, second, third] = listedJobs([
      ['run-1', 'loop run1', '2024-05-06T10:00:00Z'],
      ['run-2', 'loop run1 (2)', '2024-05-06T10:05:00Z', { rerun_of: 'run-1' }],
      ['run-3', 'seed 2', '2024-05-06T10:09:00Z', { rerun_of: 'run-1' }]
    ]);
    const shown: string[] = [];
    const { node, widget, model } = await renderPanel(
      [original, third, second],
      { ...NO_ACTIONS, showJob: jobId => shown.push(jobId) }
    );

    // Then the original's detail lists its reruns, oldest first, and none as its original
    expect(byTestId(node, 'job-rerun').map(link => link.textContent)).toEqual([
      'loop run1 (2)',
      'seed 2'
    ]);
    expect(byTestId(node, 'job-rerun-of')).toHaveLength(0);
    // When the person clicks the second rerun
    act(() => (byTestId(node, 'job-rerun')[1] as HTMLElement).click());
    expect(shown).toEqual(['run-3']);

    // And a rerun's detail names the job it reruns, as a link
    act(() => widget.dispose());
    model.dispose();

    // And a rerun's detail names the job it reruns, as a link
    const rerun = await renderPanel([second, original, third], {
      ...NO_ACTIONS,
      showJob: jobId => shown.push(jobId)
    });
    const back = byTestId(rerun.node, 'job-rerun-of');
    expect(back.map(link => link.textContent)).toEqual(['loop run1']);
    expect(byTestId(rerun.node, 'job-rerun')).toHaveLength(0);
    act(() => (back[0] as HTMLElement).click());
    expect(shown).toEqual(['run-3', 'run-1']);
    act(() => rerun.widget.dispose());
    rerun.model.dispose();
  });
});

describe('JobsView: a job started again after it was killed', () => {
  it('shows "attempt 2 of 3" on a resumed job, and nothing on a first attempt', async () => {
    // Given a job killed once and started again from its checkpoint, and a job on its first run
    const resumed = makeJob({
      job_id: 'resumed',
      status: 'RUNNING',
      attempt: 2,
      max_attempts: 3,
      checkpoint_folder: 'checkpoints/train'
    });
    const first = makeJob({ job_id: 'first', attempt: 1, max_attempts: 3 });
    const { node, widget, model } = await renderPanel([resumed, first]);

    // Then the resumed job's row says which attempt it is on, and only that row
    const attempts = byTestId(node, 'job-attempt');
    expect(attempts.map(cell => cell.textContent)).toEqual(['attempt 2 of 3']);
    expect(
      node.querySelector('[data-job-id="resumed"]')?.textContent
    ).toContain('attempt 2 of 3');

    act(() => widget.dispose());
    model.dispose();
  });
});

describe('JobsView: a job’s TensorBoard', () => {
  let cleanup: (() => void) | null = null;
  afterEach(() => {
    cleanup?.();
    cleanup = null;
  });

  it('offers TensorBoard on the person’s own job, over that job', async () => {
    // Given the lab can open TensorBoard, and the person's running job
    const opened: string[] = [];
    const { node, widget, model } = await renderPanel(
      [makeJob({ job_id: 'train', status: 'RUNNING' })],
      { ...NO_ACTIONS, openTensorBoard: job => opened.push(job.job_id) }
    );
    cleanup = () => {
      act(() => widget.dispose());
      model.dispose();
    };

    // When they click TensorBoard on its card
    const [button] = byTestId(node, 'job-action-tensorboard');
    expect(button.textContent).toBe('TensorBoard');
    await act(async () => (button as HTMLButtonElement).click());

    // Then TensorBoard opens over that job
    expect(opened).toEqual(['train']);
  });

  it('offers no TensorBoard on someone else’s job, nor where the lab has none', async () => {
    const others = await renderPanel(
      [makeJob({ job_id: 'theirs', owner: 'bob', own: false })],
      { ...NO_ACTIONS, openTensorBoard: () => undefined }
    );
    expect(byTestId(others.node, 'job-action-tensorboard')).toHaveLength(0);
    act(() => others.widget.dispose());
    others.model.dispose();

    const without = await renderPanel([makeJob({ job_id: 'mine' })]);
    expect(byTestId(without.node, 'job-action-tensorboard')).toHaveLength(0);
    act(() => without.widget.dispose());
    without.model.dispose();
  });
});
