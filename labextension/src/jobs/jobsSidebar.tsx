import { TranslationBundle } from '@jupyterlab/translation';
import {
  launchIcon,
  refreshIcon,
  SidePanel,
  ToolbarButton,
  VDomRenderer
} from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import * as React from 'react';

import { jobsIcon } from '../common/icons';
import { JobsModel } from './jobsModel';
import {
  flavorTitle,
  jobAttributes,
  ProgressBar,
  StatusBadge
} from './jobsView';
import { IDescribeJob } from '../common/models';
import { queueText } from './jobStatus';
import { EmptyHint, Hint } from '../common/hint';
import { pressable } from '../common/pressable';

/**
 * The DOM id of the Jobs sidebar (the left sidebar's Jobs tab).
 */
export const JOBS_SIDEBAR_ID = 'jp-JupyterToJob-jobsSidebar';

/**
 * What the Jobs sidebar needs.
 */
export interface IJobsSidebarOptions {
  model: JobsModel;
  /**
   * Opens the Jobs panel in the main area, at `jobId` when given.
   */
  openPanel: (jobId?: string) => void;
  trans: TranslationBundle;
}

/**
 * The user's jobs, newest first, as a narrow list: status, name, flavor, progress.
 * Clicking a job opens the Jobs panel at it, with its log and outputs.
 */
export function JobsSidebarList(props: {
  model: JobsModel;
  openPanel: (jobId?: string) => void;
  trans: TranslationBundle;
}): JSX.Element {
  const { model, trans, openPanel } = props;
  if (model.message && model.jobs.length === 0) {
    return (
      <div
        className="jp-JupyterToJob-message"
        role="alert"
        data-testid="jobs-sidebar-message"
      >
        {model.message}
      </div>
    );
  }
  if (!model.loaded) {
    return (
      <Hint testid="jobs-sidebar-loading">
        {trans.__('Loading your jobs…')}
      </Hint>
    );
  }
  if (model.jobs.length === 0) {
    return (
      <EmptyHint testid="jobs-sidebar-empty">
        {trans.__(
          'You have no jobs yet. Open a notebook and click Run as Job on its toolbar.'
        )}
      </EmptyHint>
    );
  }
  return (
    <ul
      className="jp-JupyterToJob-sidebarList"
      aria-label={trans.__('Your jobs')}
      data-testid="jobs-sidebar-list"
    >
      {model.visibleJobs.map(job => (
        <JobsSidebarItem
          key={job.job_id}
          job={job}
          open={() => openPanel(job.job_id)}
          trans={trans}
        />
      ))}
    </ul>
  );
}

function JobsSidebarItem(props: {
  job: IDescribeJob;
  open: () => void;
  trans: TranslationBundle;
}): JSX.Element {
  const { job, open, trans } = props;
  const flavor = flavorTitle(job);
  return (
    <li
      className="jp-JupyterToJob-sidebarItem"
      data-testid="jobs-sidebar-item"
      {...jobAttributes(job)}
      title={trans.__('Show “%1” in the Jobs panel', job.name)}
      {...pressable(open)}
    >
      <div className="jp-JupyterToJob-sidebarItemHead">
        <StatusBadge status={job.status} />
        <span className="jp-JupyterToJob-sidebarName">{job.name}</span>
      </div>
      <div className="jp-JupyterToJob-sidebarItemFacts">
        {job.status === 'QUEUED' ? (
          <span data-testid="job-queue-position">
            {queueText(job.queue_position)}
          </span>
        ) : (
          <ProgressBar job={job} />
        )}
        {flavor && (
          <span className="jp-JupyterToJob-sidebarFlavor">{flavor}</span>
        )}
      </div>
    </li>
  );
}

/**
 * The list's widget: follows the jobs only while the sidebar shows it.
 */
class JobsSidebarContent extends VDomRenderer<JobsModel> {
  constructor(options: IJobsSidebarOptions) {
    super(options.model);
    this._options = options;
    this.addClass('jp-JupyterToJob-sidebarContent');
  }

  protected render(): JSX.Element {
    return (
      <JobsSidebarList
        model={this.model}
        openPanel={this._options.openPanel}
        trans={this._options.trans}
      />
    );
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.model.visible = true;
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.model.visible = this.isVisible;
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this.model.visible = false;
  }

  protected onBeforeDetach(msg: Message): void {
    this.model.visible = false;
    super.onBeforeDetach(msg);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    const model = this.model;
    super.dispose();
    model.dispose();
  }

  private _options: IJobsSidebarOptions;
}

/**
 * The Jobs tab of the left sidebar: a toolbar (open the Jobs panel, refresh) over
 * the list of the user's jobs.
 */
export function createJobsSidebar(options: IJobsSidebarOptions): SidePanel {
  const { trans, model, openPanel } = options;
  const sidebar = new SidePanel();
  sidebar.id = JOBS_SIDEBAR_ID;
  sidebar.addClass('jp-JupyterToJob-sidebar');
  sidebar.node.dataset.testid = 'jobs-sidebar';
  sidebar.title.icon = jobsIcon;
  sidebar.title.caption = trans.__('Jobs');
  // A heading as JupyterLab's own side panels have (Table of Contents, Running).
  const heading = document.createElement('h2');
  heading.textContent = trans.__('Jobs');
  sidebar.header.addWidget(new Widget({ node: heading }));
  sidebar.toolbar.addItem(
    'open-jobs-panel',
    new ToolbarButton({
      icon: launchIcon,
      label: trans.__('Open Jobs panel'),
      tooltip: trans.__(
        'Open the Jobs panel: logs, outputs, schedules and pipelines'
      ),
      onClick: () => openPanel(),
      dataset: { testid: 'jobs-sidebar-open-panel' }
    })
  );
  sidebar.toolbar.addItem(
    'refresh',
    new ToolbarButton({
      icon: refreshIcon,
      tooltip: trans.__('Refresh the list'),
      onClick: () => void model.refresh(),
      dataset: { testid: 'jobs-sidebar-refresh' }
    })
  );
  const content = new JobsSidebarContent(options);
  content.title.label = trans.__('Your jobs');
  sidebar.addWidget(content);
  return sidebar;
}
