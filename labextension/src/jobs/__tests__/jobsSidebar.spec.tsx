/**
 * The Jobs tab of the left sidebar: a narrow list of one's jobs that opens the Jobs
 * panel, and the plugin that puts it there with a launcher card.
 */
import { nullTranslator } from '@jupyterlab/translation';
import { SidePanel } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { Widget } from '@lumino/widgets';

import { JobsAPI } from '../../common/api';
import { CommandIDs } from '../../common/commands';
import plugins from '../../index';
import { JobsModel } from '../jobsModel';
import { createJobsSidebar, JOBS_SIDEBAR_ID } from '../jobsSidebar';
import { IDescribeJob } from '../../common/models';
import { makeJob } from '../../__tests__/jobs.fixture';
import { settle } from '../../__tests__/jobsPanel.fixture';

// React's act() outside a test renderer
(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

const trans = nullTranslator.load('jupyter_to_job');

/**
 * A job API that lists `jobs` and counts how often it was asked.
 */
function listing(jobs: IDescribeJob[]): { api: JobsAPI; calls: () => number } {
  let calls = 0;
  const api = {
    listRecentJobs: async () => {
      calls++;
      return { jobs, next_token: null, total_count: jobs.length };
    }
  };
  return { api: api as unknown as JobsAPI, calls: () => calls };
}

const byTestId = (node: HTMLElement, id: string) =>
  Array.from(node.querySelectorAll<HTMLElement>(`[data-testid="${id}"]`));

describe('The Jobs sidebar', () => {
  let sidebar: SidePanel | null = null;
  afterEach(async () => {
    await settle(() => sidebar?.dispose());
    sidebar = null;
  });

  async function showSidebar(jobs: IDescribeJob[]) {
    const { api, calls } = listing(jobs);
    const opened: (string | undefined)[] = [];
    sidebar = createJobsSidebar({
      model: new JobsModel({ api }),
      openPanel: jobId => opened.push(jobId),
      trans
    });
    await settle(() => Widget.attach(sidebar!, document.body));
    await settle();
    return { node: sidebar.node, opened, calls };
  }

  it('lists a researcher’s jobs newest first, with status, progress and flavor title', async () => {
    // Given a finished job and a newer one running on the "One whole GPU" flavor
    const finished = makeJob({ job_id: 'old', name: 'prepare' });
    const running = makeJob({
      job_id: 'new',
      name: 'train run1',
      status: 'RUNNING',
      create_time: '2024-05-06T11:00:00.000Z',
      flavor: 'gpu-job',
      flavor_title: 'One whole GPU',
      cells_completed: 1,
      cells_total: 4,
      current_cell: 2
    });

    // When she opens the Jobs tab of the left sidebar
    const { node } = await showSidebar([finished, running]);

    // Then both are listed, the running one first, by name, status and title
    const items = byTestId(node, 'jobs-sidebar-item');
    expect(items.map(item => item.dataset.jobId)).toEqual(['new', 'old']);
    expect(items[0].textContent).toContain('train run1');
    expect(items[0].textContent).toContain('Running');
    expect(items[0].textContent).toContain('1 of 4 cells');
    expect(items[0].textContent).toContain('One whole GPU');
    expect(items[0].textContent).not.toContain('gpu-job');
    expect(items[1].textContent).toContain('Completed');
  });

  it('opens the Jobs panel at the job clicked, or as it is from the toolbar', async () => {
    // Given the sidebar with one job
    const { node, opened } = await showSidebar([makeJob({ job_id: 'j1' })]);

    // When she clicks the job, then presses Enter on it, then the toolbar's button
    await settle(() => byTestId(node, 'jobs-sidebar-item')[0].click());
    await settle(() =>
      byTestId(node, 'jobs-sidebar-item')[0].dispatchEvent(
        new KeyboardEvent('keydown', { key: 'Enter', bubbles: true })
      )
    );
    const open = byTestId(node, 'jobs-sidebar-open-panel');
    expect(open.map(button => button.textContent)).toEqual(['Open Jobs panel']);
    await settle(() => open[0].click());

    // Then the panel is opened at that job twice, then without a job
    expect(opened).toEqual(['j1', 'j1', undefined]);
  });

  it('tells someone with no jobs how to make one', async () => {
    const { node } = await showSidebar([]);
    expect(byTestId(node, 'jobs-sidebar-empty')[0].textContent).toBe(
      'You have no jobs yet. Open a notebook and click Run as Job on its toolbar.'
    );
  });

  it('asks the server for the jobs only while the sidebar shows', async () => {
    // Given the sidebar shown once
    const { calls } = await showSidebar([makeJob()]);
    const asked = calls();
    expect(asked).toBeGreaterThan(0);

    // When another sidebar tab hides it and its list is refreshed by the timer
    sidebar!.hide();
    await settle();
    const model = (sidebar!.widgets[0] as unknown as { model: JobsModel })
      .model;

    // Then the model stands by
    expect(model.visible).toBe(false);
    expect(calls()).toBe(asked);

    // And when it shows again, it asks again
    sidebar!.show();
    await settle();
    expect(model.visible).toBe(true);
    expect(calls()).toBeGreaterThan(asked);
  });
});

describe('The Jobs panel plugin', () => {
  it('puts a Jobs tab in the left sidebar, restored with the layout, and a Jobs card in the launcher', async () => {
    // Given JupyterLab with a restorer and a launcher
    const added: { widget: Widget; area: string }[] = [];
    const restored: string[] = [];
    const cards: { command: string; category?: string }[] = [];
    const commands = new CommandRegistry();
    const app = {
      commands,
      shell: {
        add: (widget: Widget, area: string) => added.push({ widget, area })
      },
      serviceManager: {
        serverSettings: { baseUrl: 'http://localhost/', init: {} },
        contents: {}
      }
    };
    const restorer = {
      restore: async () => undefined,
      add: (_widget: Widget, name: string) => restored.push(name)
    };
    const launcher = { add: (card: any) => cards.push(card) };
    const plugin = plugins.find(
      one => one.id === '@campus-gpu-hub/jupyter-to-job:jobs-panel'
    )!;

    // When the plugin starts
    plugin.activate(app as any, restorer, null, null, launcher, null);
    await settle(() => undefined, 50);

    // Then the left sidebar has the Jobs tab, with the Jobs icon and caption
    const left = added.filter(one => one.area === 'left');
    expect(left.map(one => one.widget.id)).toEqual([JOBS_SIDEBAR_ID]);
    expect(left[0].widget.title.caption).toBe('Jobs');
    expect(restored).toEqual(['jupyter-to-job-sidebar']);
    // And the launcher has a Jobs card that opens the panel
    expect(cards).toEqual([
      expect.objectContaining({
        command: CommandIDs.openJobsPanel,
        category: 'Other'
      })
    ]);
    expect(commands.label(CommandIDs.openJobsPanel)).toBe('Jobs');
    expect(commands.icon(CommandIDs.openJobsPanel)).toBeDefined();
    await settle(() => left[0].widget.dispose());
  });
});
