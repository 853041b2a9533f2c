import { MainAreaWidget } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { Contents, ServerConnection } from '@jupyterlab/services';
import { TranslationBundle } from '@jupyterlab/translation';
import { classes, VDomRenderer } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { featuresOf, JobsAPI } from '../common/api';
import { JobAPIError } from '../common/errors';
import { jobsIcon } from '../common/icons';
import { ask, IQuestion } from '../common/questions';
import { JobsModel } from './jobsModel';
import { IJobActions, JobsView } from './jobsView';
import {
  IDescribeJob,
  IJobServiceConfig,
  OutputFormat
} from '../common/models';
import { NotificationSettingsDialog } from './notificationSettingsDialog';
import { IDescribePipeline } from '../pipelines/pipelineModels';
import { PipelinesModel } from '../pipelines/pipelinesModel';
import { IPipelineActions, PipelinesView } from '../pipelines/pipelinesView';
import { ISchedule } from '../schedules/scheduleModels';
import { scheduleName } from '../schedules/scheduleRule';
import { SchedulesModel } from '../schedules/schedulesModel';
import { IScheduleActions, SchedulesView } from '../schedules/schedulesView';
import { rerunAsJob } from '../runAsJob/runAsJob';
import { jobFolder } from '../tensorboard/tensorboard';
import { executedNotebookPath, OUTPUT_FOLDER } from '../runAsJob/submission';

/**
 * The DOM id of the Jobs panel; there is at most one.
 */
export const JOBS_PANEL_ID = 'jp-JupyterToJob-jobsPanel';

/**
 * The tabs of the Jobs panel.
 */
export type JobsPanelTab = 'jobs' | 'schedules' | 'pipelines';

/**
 * What the Jobs panel needs.
 */
export interface IJobsPanelOptions {
  model: JobsModel;
  /**
   * The Schedules tab's model; without it the panel has no tabs.
   */
  schedules?: SchedulesModel | null;
  /**
   * The Pipelines tab's model; without it the panel has no Pipelines tab.
   */
  pipelines?: PipelinesModel | null;
  /**
   * Opens the pipeline builder (the Pipelines tab's "Run notebooks as a pipeline…").
   */
  newPipeline?: (() => void) | null;
  /**
   * Opens TensorBoard over a folder of the user's files (a job's TensorBoard
   * button); none: no button.
   */
  openTensorBoard?: ((folder: string) => void) | null;
  /**
   * Opens executed notebooks; without it the Open button only saves.
   */
  docManager: IDocumentManager | null;
  /**
   * The server's contents (to make the output folder).
   */
  contents: Contents.IManager;
  /**
   * The server's `api/config`, when it could be read (features decide the buttons).
   */
  config: IJobServiceConfig | null;
  trans: TranslationBundle;
}

/**
 * The content of the Jobs panel: renders the model, polls only while shown.
 */
export class JobsPanel extends VDomRenderer<JobsModel> {
  constructor(options: IJobsPanelOptions) {
    super(options.model);
    this._options = options;
    this._questions = panelQuestions(options.trans);
    const openTensorBoard = options.openTensorBoard;
    if (openTensorBoard) {
      this._actions.openTensorBoard = job =>
        openTensorBoard(jobFolder(job.input_path));
    }
    this.addClass('jp-JupyterToJob-JobsPanel-content');
    this.node.dataset.testid = 'jobs-panel';
    options.schedules?.stateChanged.connect(this._onSubmodelChanged, this);
    options.pipelines?.stateChanged.connect(this._onSubmodelChanged, this);
  }

  /**
   * The tab shown.
   */
  get tab(): JobsPanelTab {
    return this._tab;
  }

  /**
   * Show one tab; only the shown tab's list is refreshed on a timer.
   */
  showTab(tab: JobsPanelTab): void {
    if (tab === this._tab) {
      return;
    }
    this._tab = tab;
    this._syncVisible();
    this.update();
  }

  /**
   * Show the Schedules tab at `scheduleId`.
   */
  async showSchedule(scheduleId: string): Promise<void> {
    this.showTab('schedules');
    await this._options.schedules?.show(scheduleId);
  }

  /**
   * Show the Pipelines tab at `pipelineId`.
   */
  async showPipeline(pipelineId: string): Promise<void> {
    this.showTab('pipelines');
    await this._options.pipelines?.show(pipelineId);
  }

  /**
   * Open the Notification settings dialog (the user's default for their jobs).
   */
  async openNotificationSettings(): Promise<void> {
    const dialog = new NotificationSettingsDialog({
      api: this.model.api,
      config: this._options.config,
      trans: this._options.trans
    });
    try {
      await dialog.launch();
    } catch {
      // closed without an answer (the page went away): nothing was saved
    } finally {
      dialog.dispose();
    }
  }

  /**
   * Use the server's config (read after the panel opened) for the buttons.
   */
  setConfig(config: IJobServiceConfig): void {
    this._options = { ...this._options, config };
    this.update();
  }

  protected render(): JSX.Element {
    const { trans, config, schedules, pipelines } = this._options;
    const jobs = (
      <JobsView
        model={this.model}
        features={featuresOf(config)}
        actions={this._actions}
        trans={trans}
      />
    );
    if (!schedules && !pipelines) {
      return jobs;
    }
    // Not "Jobs": the panel's own tab in the main area is named so.
    const tabs: [JobsPanelTab, string][] = [['jobs', trans.__('Job list')]];
    if (schedules) {
      tabs.push(['schedules', trans.__('Schedules')]);
    }
    if (pipelines) {
      tabs.push(['pipelines', trans.__('Pipelines')]);
    }
    return (
      <div className="jp-JupyterToJob-tabbed">
        <div
          className="jp-JupyterToJob-tabs"
          role="tablist"
          aria-label={trans.__('Jobs, schedules and pipelines')}
        >
          {tabs.map(([tab, label]) => (
            <button
              key={tab}
              type="button"
              role="tab"
              id={`jp-JupyterToJob-tab-${tab}`}
              aria-selected={this._tab === tab}
              aria-controls={`jp-JupyterToJob-tabpanel-${tab}`}
              className={classes(
                'jp-JupyterToJob-tab',
                this._tab === tab && 'jp-mod-current'
              )}
              data-testid={`jobs-tab-${tab}`}
              onClick={() => this.showTab(tab)}
            >
              {label}
            </button>
          ))}
        </div>
        <div
          className="jp-JupyterToJob-tabPanel"
          role="tabpanel"
          id={`jp-JupyterToJob-tabpanel-${this._tab}`}
          aria-labelledby={`jp-JupyterToJob-tab-${this._tab}`}
        >
          {this._tab === 'jobs' && jobs}
          {this._tab === 'pipelines' && pipelines && (
            <PipelinesView
              model={pipelines}
              actions={this._pipelineActions}
              trans={trans}
              onNewPipeline={this._options.newPipeline ?? null}
            />
          )}
          {this._tab === 'schedules' && schedules && (
            <SchedulesView
              model={schedules}
              actions={this._scheduleActions}
              trans={trans}
            />
          )}
        </div>
      </div>
    );
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._shown = true;
    this._syncVisible();
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._shown = false;
    this._syncVisible();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this._shown = this.isVisible;
    this._syncVisible();
  }

  protected onBeforeDetach(msg: Message): void {
    this._shown = false;
    this._syncVisible();
    super.onBeforeDetach(msg);
  }

  /**
   * The jobs are followed while the panel shows (a job's end is told from any tab);
   * the schedules only while their tab shows.
   */
  private _syncVisible(): void {
    if (this.isDisposed || !this.model) {
      return; // detached while disposed: the models are disposed with it
    }
    this.model.visible = this._shown;
    if (this._options.schedules) {
      this._options.schedules.visible =
        this._shown && this._tab === 'schedules';
    }
    if (this._options.pipelines) {
      this._options.pipelines.visible =
        this._shown && this._tab === 'pipelines';
    }
  }

  private _onSubmodelChanged(): void {
    this.update();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    const model = this.model;
    const { schedules, pipelines } = this._options;
    super.dispose();
    model.dispose();
    schedules?.dispose();
    pipelines?.dispose();
  }

  private _actions: IJobActions = {
    stop: job =>
      void this._ifConfirmed(this._questions.stopJob(job), () =>
        this.model.stop(job)
      ),
    remove: job =>
      void this._ifConfirmed(this._questions.removeJob(job), () =>
        this.model.remove(job)
      ),
    rerun: job => void this._rerun(job),
    openNotebook: job => void this._openNotebook(job),
    downloadHtml: job => void this._download(job, 'html'),
    showPipeline: pipelineId =>
      this._options.pipelines ? void this.showPipeline(pipelineId) : undefined,
    showSchedule: scheduleId =>
      this._options.schedules ? void this.showSchedule(scheduleId) : undefined,
    notificationSettings: () => void this.openNotificationSettings(),
    showJob: jobId => void this.model.showJob(jobId)
  };

  private _scheduleActions: IScheduleActions = {
    pause: schedule => void this._options.schedules?.pause(schedule),
    resume: schedule => void this._options.schedules?.resume(schedule),
    remove: schedule =>
      void this._ifConfirmed(this._questions.removeSchedule(schedule), () =>
        this._options.schedules?.remove(schedule)
      ),
    showJob: jobId => {
      this.showTab('jobs');
      void this.model.showJob(jobId);
    },
    showPipeline: pipelineId => void this.showPipeline(pipelineId)
  };

  private _pipelineActions: IPipelineActions = {
    stop: pipeline =>
      void this._ifConfirmed(this._questions.stopPipeline(pipeline), () =>
        this._options.pipelines?.stop(pipeline)
      ),
    remove: pipeline =>
      void this._ifConfirmed(this._questions.removePipeline(pipeline), () =>
        this._options.pipelines?.remove(pipeline)
      ),
    rerun: pipeline => void this._options.pipelines?.rerun(pipeline),
    showJob: jobId => {
      this.showTab('jobs');
      void this.model.showJob(jobId);
    }
  };

  /**
   * Ask `question` as a warning (going on stops work or deletes something) and
   * `act` only on yes.
   */
  private async _ifConfirmed(
    question: IQuestion,
    act: () => Promise<void> | undefined
  ): Promise<void> {
    if (await ask({ ...question, warn: true })) {
      await act();
    }
  }

  /**
   * Rerun: the Run as Job dialog, filled from the job; the new job is selected.
   */
  private async _rerun(job: IDescribeJob): Promise<void> {
    const { trans } = this._options;
    await this.model.run('rerun', async () => {
      const config = this._options.config ?? (await this.model.api.getConfig());
      const created = await rerunAsJob({
        api: this.model.api,
        config,
        trans,
        job,
        takenNames: this.model.jobs
          .filter(item => item.own)
          .map(item => item.name)
      });
      if (created) {
        await this.model.showJob(created.job_id);
      }
    });
  }

  private _openNotebook(job: IDescribeJob): Promise<void> {
    return this.model.run('open', async () => {
      const path = await saveExecutedNotebook(
        this.model.api,
        this._options.contents,
        job
      );
      this._options.docManager?.openOrReveal(path);
    });
  }

  private _download(job: IDescribeJob, format: OutputFormat): Promise<void> {
    return this.model.run('download', async () => {
      const blob = await this.model.api.downloadOutput(job.job_id, format);
      const output = job.outputs.find(item => item.format === format);
      downloadBlob(blob, output?.name ?? `${job.name}.${format}`);
    });
  }

  private _options: IJobsPanelOptions;
  private _questions: IPanelQuestions;
  private _tab: JobsPanelTab = 'jobs';
  private _shown = false;
}

/**
 * What the Jobs panel asks before it stops or deletes a job, pipeline or schedule.
 */
interface IPanelQuestions {
  stopJob(job: IDescribeJob): IQuestion;
  removeJob(job: IDescribeJob): IQuestion;
  stopPipeline(pipeline: IDescribePipeline): IQuestion;
  removePipeline(pipeline: IDescribePipeline): IQuestion;
  removeSchedule(schedule: ISchedule): IQuestion;
}

function panelQuestions(trans: TranslationBundle): IPanelQuestions {
  return {
    stopJob: job => ({
      title: trans.__('Stop “%1”?', job.name),
      body:
        job.status === 'RUNNING'
          ? trans.__(
              'The running cell is interrupted and the job ends as Stopped. Its log and the notebook as executed so far are kept.'
            )
          : trans.__('The job leaves the queue and ends as Stopped.'),
      keep: trans.__('Keep running'),
      act: trans.__('Stop job')
    }),
    removeJob: job => ({
      title: trans.__('Delete “%1”?', job.name),
      body: trans.__(
        'The job, its log and its outputs are deleted for good. Executed notebooks you saved into your files stay.'
      ),
      keep: trans.__('Cancel'),
      act: trans.__('Delete job')
    }),
    stopPipeline: pipeline => ({
      title: trans.__('Stop the pipeline “%1”?', pipeline.name),
      body: trans.__(
        'Its running jobs are stopped and the stages not started yet are skipped. Logs and outputs so far are kept.'
      ),
      keep: trans.__('Keep running'),
      act: trans.__('Stop pipeline')
    }),
    removePipeline: pipeline => ({
      title: trans.__('Delete the pipeline “%1”?', pipeline.name),
      body: trans.__(
        'The pipeline leaves this list. Its jobs, their logs and outputs stay in the Jobs tab, and its shared folder stays in your files.'
      ),
      keep: trans.__('Cancel'),
      act: trans.__('Delete pipeline')
    }),
    removeSchedule: schedule => ({
      title: trans.__('Delete the schedule “%1”?', scheduleName(schedule)),
      body: trans.__(
        'No more runs start. The jobs it already started, their logs and outputs stay in the Jobs tab.'
      ),
      keep: trans.__('Keep it'),
      act: trans.__('Delete schedule')
    })
  };
}

/**
 * What creating the Jobs panel needs.
 */
export interface ICreateJobsPanelOptions {
  serverSettings: ServerConnection.ISettings;
  /**
   * Opens the pipeline builder.
   */
  newPipeline?: (() => void) | null;
  /**
   * Opens TensorBoard over a folder (the jobs' TensorBoard buttons).
   */
  openTensorBoard?: ((folder: string) => void) | null;
  docManager: IDocumentManager | null;
  contents: Contents.IManager;
  trans: TranslationBundle;
}

/**
 * Create the Jobs panel shown in the main area. It reads the server's config
 * after it opens; the list works without it.
 */
export function createJobsPanel(
  options: ICreateJobsPanelOptions
): MainAreaWidget<JobsPanel> {
  const api = new JobsAPI(options.serverSettings);
  const content = new JobsPanel({
    model: new JobsModel({ api }),
    schedules: new SchedulesModel({ api }),
    pipelines: new PipelinesModel({ api }),
    newPipeline: options.newPipeline ?? null,
    openTensorBoard: options.openTensorBoard ?? null,
    docManager: options.docManager,
    contents: options.contents,
    config: null,
    trans: options.trans
  });
  const panel = new MainAreaWidget({ content });
  panel.id = JOBS_PANEL_ID;
  panel.addClass('jp-JupyterToJob-JobsPanel');
  panel.title.label = options.trans.__('Jobs');
  panel.title.caption = options.trans.__('Your Run as Job jobs');
  panel.title.icon = jobsIcon;
  panel.title.closable = true;
  api.getConfig().then(
    config => {
      if (!content.isDisposed) {
        content.setConfig(config);
      }
    },
    () => undefined // the list shows why the server cannot be used
  );
  return panel;
}

/**
 * Save the job's executed notebook into the user's files (`job-outputs/`) and
 * return its path. An earlier save of the same job is reused (409: it exists).
 *
 * The server extension writes it (`outputs/ipynb/save`, making the folder); a
 * server without that end point (404 from Jupyter itself) gets the notebook
 * downloaded and written through the contents API.
 */
export async function saveExecutedNotebook(
  api: JobsAPI,
  contents: Contents.IManager,
  job: IDescribeJob
): Promise<string> {
  const path = executedNotebookPath(job);
  try {
    const saved = await api.saveOutput(job.job_id, 'ipynb', {
      path,
      overwrite: false
    });
    return saved.path || path;
  } catch (error) {
    if (!(error instanceof JobAPIError)) {
      throw error;
    }
    if (error.status === 409) {
      return path; // saved before: the same job's output
    }
    if (!(error.status === 404 && error.reason === null)) {
      throw error;
    }
  }
  const blob = await api.downloadOutput(job.job_id, 'ipynb');
  await ensureFolder(contents, OUTPUT_FOLDER);
  await contents.save(path, {
    type: 'notebook',
    format: 'json',
    content: JSON.parse(await blob.text())
  });
  return path;
}

async function ensureFolder(
  contents: Contents.IManager,
  folder: string
): Promise<void> {
  try {
    await contents.get(folder, { content: false });
  } catch {
    await contents.save(folder, { type: 'directory' });
  }
}

function downloadBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  link.style.display = 'none';
  document.body.appendChild(link);
  link.click();
  link.remove();
  // Give the browser time to start the download before the URL goes.
  window.setTimeout(() => URL.revokeObjectURL(url), 30 * 1000);
}
