/**
 * The Pipelines tab of the Jobs panel as rendered: a failed pipeline shows which job
 * failed where, which was stopped and which stage was skipped; Stop and Delete appear
 * only when they make sense and the viewer may; a job opens its log in the Jobs tab;
 * an unfinished pipeline is followed until it ends.
 */
import { Dialog } from '@jupyterlab/apputils';
import { act } from 'react';

import { JobsAPI } from '../../common/api';
import {
  ICreatePipeline,
  IDescribePipeline,
  PipelineTemplateRun
} from '../pipelineModels';
import { pipelineRerunRequest } from '../pipelineStatus';
import { PipelinesModel } from '../pipelinesModel';
import { makeJob } from '../../__tests__/jobs.fixture';
import {
  emptyLog,
  openPanelTab,
  settle,
  shownJob
} from '../../__tests__/jobsPanel.fixture';
import {
  makeFailedPipeline,
  makePipelineJob
} from '../../__tests__/pipelines.fixture';

(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

class FakeServer {
  constructor(public pipelines: IDescribePipeline[]) {}
  readonly calls: string[] = [];
  listCount = 0;

  async listPipelines(): Promise<IDescribePipeline[]> {
    this.listCount++;
    return this.pipelines;
  }
  async stopPipeline(id: string): Promise<IDescribePipeline> {
    this.calls.push(`STOP ${id}`);
    const stopping = {
      ...this.pipelines.find(item => item.pipeline_id === id)!,
      status: 'STOPPING' as const
    };
    this.pipelines = this.pipelines.map(item =>
      item.pipeline_id === id ? stopping : item
    );
    return stopping;
  }
  readonly reruns: (ICreatePipeline | PipelineTemplateRun)[] = [];
  async createPipeline(request: ICreatePipeline | PipelineTemplateRun) {
    this.reruns.push(request);
    const made = makeFailedPipeline({
      pipeline_id: 'pipe-2',
      status: 'RUNNING',
      status_message: null,
      end_time: null
    });
    this.pipelines = [made, ...this.pipelines];
    return made;
  }
  async deletePipeline(id: string): Promise<void> {
    this.calls.push(`DELETE ${id}`);
    this.pipelines = this.pipelines.filter(item => item.pipeline_id !== id);
  }
  async listRecentJobs() {
    const jobs = ['job-prepare', 'job-eval-a', 'job-eval-b'].map(id =>
      makeJob({ job_id: id, pipeline_id: 'pipe-1' })
    );
    return { jobs, next_token: null, total_count: jobs.length };
  }
  async getLog(jobId: string, offset: number) {
    return emptyLog(jobId, offset);
  }
  get api(): JobsAPI {
    return this as unknown as JobsAPI;
  }
}

async function openPipelinesTab(server: FakeServer, refreshInterval = 2000) {
  const panel = await openPanelTab(server.api, 'pipelines', {
    pipelines: new PipelinesModel({ api: server.api, refreshInterval })
  });
  const all = (selector: string, root: ParentNode = panel.node) => [
    ...root.querySelectorAll<HTMLElement>(selector)
  ];
  return { panel, all };
}

afterEach(async () => {
  await act(async () => Dialog.flush());
  document.body.innerHTML = '';
  jest.useRealTimers();
});

describe('The Pipelines tab of the Jobs panel', () => {
  it('shows a failed pipeline: which job failed where, which was stopped, which stage was skipped', async () => {
    const server = new FakeServer([makeFailedPipeline()]);
    const { panel, all } = await openPipelinesTab(server);

    // Then the pipeline says why it failed
    expect(all('[data-testid="pipeline-status"]')[0].textContent).toContain(
      "'eval-b.ipynb' failed in cell 3"
    );
    // And each stage has its status, in order
    expect(
      all('[data-testid="pipeline-stage"]').map(
        stage => `${stage.dataset.stage}:${stage.dataset.status}`
      )
    ).toEqual(['prepare:COMPLETED', 'evaluate:FAILED', 'report:SKIPPED']);
    // And each job says where it is and why
    const why = all('[data-testid="pipeline-job"]').map(job => [
      job.dataset.status,
      job.querySelector('[data-testid="pipeline-job-why"]')?.textContent ?? ''
    ]);
    expect(why).toEqual([
      ['COMPLETED', ''],
      ['STOPPED', "Stopped because 'eval-b.ipynb' of stage 'evaluate' failed."],
      ['FAILED', 'Failed in cell 3: ValueError: bad split'],
      ['SKIPPED', "Skipped because 'eval-b.ipynb' of stage 'evaluate' failed."]
    ]);
    // And the skipped job, which never ran, has no log to open
    expect(
      all('[data-testid="pipeline-job-open"]').map(link => link.textContent)
    ).toEqual(['prepare.ipynb', 'eval-a.ipynb', 'eval-b.ipynb']);
    // And each job's flavor reads as its title, not its id
    const flavors = all(
      '[data-testid="pipeline-job"] .jp-JupyterToJob-hint'
    ).map(hint => hint.textContent ?? '');
    expect(flavors[0]).toMatch(/^CPU job/);
    expect(flavors.join(' ')).not.toMatch(/\bcpu\b/);
    // And a finished pipeline offers Delete, not Stop
    expect(all('[data-testid="pipeline-action-stop"]')).toHaveLength(0);
    expect(all('[data-testid="pipeline-action-delete"]')).toHaveLength(1);

    act(() => panel.dispose());
  });

  it('offers Stop on a running pipeline only to a viewer who may stop it, and asks first', async () => {
    const running = makeFailedPipeline({
      pipeline_id: 'mine',
      status: 'RUNNING',
      status_message: null,
      end_time: null,
      can_stop: true,
      can_delete: false
    });
    const notMine = {
      ...running,
      pipeline_id: 'theirs',
      own: false,
      can_stop: false
    };
    const server = new FakeServer([running, notMine]);
    const { panel, all } = await openPipelinesTab(server);
    const card = (id: string) =>
      panel.node.querySelector<HTMLElement>(`[data-pipeline-id="${id}"]`)!;

    expect(
      all('[data-testid="pipeline-action-stop"]', card('mine'))
    ).toHaveLength(1);
    expect(
      all('[data-testid="pipeline-action-stop"]', card('theirs'))
    ).toHaveLength(0);
    expect(all('[data-testid="pipeline-action-delete"]')).toHaveLength(0);

    // When the student clicks Stop and confirms
    await settle(() =>
      all('[data-testid="pipeline-action-stop"]', card('mine'))[0].click()
    );
    expect(document.querySelector('.jp-Dialog')?.textContent).toContain(
      'Stop the pipeline “train and evaluate”?'
    );
    await settle(() =>
      document.querySelector<HTMLElement>('.jp-Dialog .jp-mod-accept')!.click()
    );
    await settle();

    // Then it is asked to stop, and shows as stopping, without a second Stop
    expect(server.calls).toEqual(['STOP mine']);
    expect(card('mine').dataset.status).toBe('STOPPING');
    expect(
      all('[data-testid="pipeline-action-stop"]', card('mine'))
    ).toHaveLength(0);
    act(() => panel.dispose());
  });

  it('reruns a finished pipeline with the same stages, notebooks, flavors and values', async () => {
    const server = new FakeServer([makeFailedPipeline()]);
    const { panel, all } = await openPipelinesTab(server);

    await settle(() => all('[data-testid="pipeline-action-rerun"]')[0].click());
    await settle();

    expect(server.reruns).toEqual([
      {
        name: 'train and evaluate',
        stages: [
          {
            name: 'prepare',
            jobs: [
              {
                input_path: 'course/prepare.ipynb',
                name: null,
                flavor: 'cpu',
                parameters: {}
              }
            ]
          },
          {
            name: 'evaluate',
            jobs: [
              {
                input_path: 'course/eval-a.ipynb',
                name: null,
                flavor: 'cpu',
                parameters: {}
              },
              {
                input_path: 'course/eval-b.ipynb',
                name: null,
                flavor: 'cpu',
                parameters: {}
              }
            ]
          },
          {
            name: 'report',
            jobs: [
              {
                input_path: 'course/report.ipynb',
                name: null,
                flavor: 'cpu',
                parameters: {}
              }
            ]
          }
        ],
        parameters: { epochs: 2 },
        shared_folder: 'pipelines/train-and-evaluate'
      }
    ]);
    // And the new run is listed first, brought forward, without Rerun while it runs
    const cards = all('[data-testid="pipeline"]');
    expect(cards[0].dataset.pipelineId).toBe('pipe-2');
    expect(cards[0].classList.contains('jp-mod-selected')).toBe(true);
    expect(
      cards[0].querySelector('[data-testid="pipeline-action-rerun"]')
    ).toBeNull();
    // (a pipeline from a template reruns its template, with its values)
    expect(
      pipelineRerunRequest(
        makeFailedPipeline({ template_path: 'course/nightly.pipeline.yaml' })
      )
    ).toEqual({
      template_path: 'course/nightly.pipeline.yaml',
      parameters: { epochs: 2 }
    });
    act(() => panel.dispose());
  });

  it('opens a job’s log in the Jobs tab when the student clicks it', async () => {
    const server = new FakeServer([makeFailedPipeline()]);
    const { panel, all } = await openPipelinesTab(server);

    await settle(() => all('[data-testid="pipeline-job-open"]')[2].click());
    await settle();

    expect(shownJob(panel)).toEqual({ tab: 'jobs', jobId: 'job-eval-b' });
    act(() => panel.dispose());
  });

  it('tags a job a pipeline started, and its detail leads back to the pipeline', async () => {
    const server = new FakeServer([makeFailedPipeline()]);
    const { panel, all } = await openPipelinesTab(server);
    await settle(() => all('[data-testid="pipeline-job-open"]')[1].click());
    await settle();
    expect(panel.tab).toBe('jobs');
    expect(
      all('[data-testid="job-origin"]').map(tag => tag.textContent)
    ).toEqual(['pipeline', 'pipeline', 'pipeline']);

    // When the student follows "Started by a pipeline"
    await settle(() => all('[data-testid="job-show-pipeline"]')[0].click());
    await settle();

    // Then the Pipelines tab shows that pipeline, brought forward
    expect(panel.tab).toBe('pipelines');
    expect(
      panel.node
        .querySelector('[data-pipeline-id="pipe-1"]')
        ?.classList.contains('jp-mod-selected')
    ).toBe(true);
    act(() => panel.dispose());
  });

  it('follows an unfinished pipeline until it ends, then stops asking', async () => {
    jest.useFakeTimers();
    // Given a pipeline whose second stage runs
    const running = makeFailedPipeline({
      status: 'RUNNING',
      status_message: null,
      current_stage: 1,
      can_stop: true,
      can_delete: false,
      stages: [
        makeFailedPipeline().stages[0],
        {
          name: 'evaluate',
          status: 'RUNNING',
          status_message: null,
          jobs: [makePipelineJob({ status: 'RUNNING', cells_completed: 1 })]
        }
      ]
    });
    const server = new FakeServer([running]);
    const { panel, all } = await openPipelinesTab(server, 1000);
    const before = server.listCount;

    // When time passes, the tab asks again, and shows the pipeline's end
    server.pipelines = [
      { ...running, status: 'COMPLETED', can_stop: false, can_delete: true }
    ];
    await act(async () => {
      await jest.advanceTimersByTimeAsync(1500);
    });
    expect(server.listCount).toBeGreaterThan(before);
    expect(all('[data-testid="pipeline"]')[0].dataset.status).toBe('COMPLETED');

    // And while a job of a failed pipeline is still stopping, it keeps asking
    const stopping = makeFailedPipeline();
    stopping.stages[1].jobs[0] = {
      ...stopping.stages[1].jobs[0],
      status: 'STOPPING'
    };
    server.pipelines = [stopping];
    await act(async () => {
      await jest.advanceTimersByTimeAsync(1500);
    });
    expect(panel.node.querySelector('[data-status="STOPPING"]')).not.toBeNull();
    server.pipelines = [makeFailedPipeline()];
    await act(async () => {
      await jest.advanceTimersByTimeAsync(1500);
    });
    expect(
      panel.node.querySelector(
        '[data-testid="pipeline-job"][data-status="STOPPED"]'
      )
    ).not.toBeNull();

    // Then, with every pipeline and job finished, it asks no more
    const after = server.listCount;
    await act(async () => {
      await jest.advanceTimersByTimeAsync(10000);
    });
    expect(server.listCount).toBe(after);
    act(() => panel.dispose());
  });
});
