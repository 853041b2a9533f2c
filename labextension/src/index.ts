import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ICommandPalette,
  MainAreaWidget,
  WidgetTracker
} from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import {
  ReadonlyJSONObject,
  ReadonlyPartialJSONObject
} from '@lumino/coreutils';

import { CommandIDs } from './common/commands';
import {
  jobsIcon,
  pipelineIcon,
  runAsJobIcon,
  tensorboardIcon
} from './common/icons';
import type { JobsPanel } from './jobs/jobsPanel';
import type { IOpenNotebook } from './pipelines/runPipeline';
import { hasUnsavedCells } from './runAsJob/unsavedCells';

/**
 * The translation domain of the extension (its Python package name).
 */
const TRANSLATION_DOMAIN = 'jupyter_to_job';

/**
 * A command's arguments, all strings: each name with what it means, and the values
 * it may take where `values` names them.
 */
function stringArgs(
  described: { [name: string]: string },
  values: { [name: string]: string[] } = {}
): { args: ReadonlyJSONObject } {
  const properties: { [name: string]: ReadonlyJSONObject } = {};
  for (const [name, description] of Object.entries(described)) {
    properties[name] = values[name]
      ? { type: 'string', enum: values[name], description }
      : { type: 'string', description };
  }
  return { args: { type: 'object', properties } };
}

/**
 * Run as Job: the command behind the notebook toolbar button, the file browser's
 * context menu (both declared in schema/plugin.json) and the command palette.
 */
const runAsJobPlugin: JupyterFrontEndPlugin<void> = {
  id: '@campus-gpu-hub/jupyter-to-job:plugin',
  description:
    'Run the open notebook as a batch GPU job: the Run as Job button and dialog.',
  autoStart: true,
  requires: [IDocumentManager],
  optional: [
    INotebookTracker,
    IDefaultFileBrowser,
    ICommandPalette,
    ITranslator
  ],
  activate: (
    app: JupyterFrontEnd,
    docManager: IDocumentManager,
    notebooks: INotebookTracker | null,
    fileBrowser: IDefaultFileBrowser | null,
    palette: ICommandPalette | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    // What the Run as Job dialog and the pipeline dialogs need from the lab.
    const context = {
      serverSettings: app.serviceManager.serverSettings,
      docManager,
      trans
    };
    // What a dialog made, brought forward in the Jobs panel. A job names its pipeline
    // and schedule too (null here): a job is what has a job_id; a schedule has
    // neither a job_id nor a pipeline_id.
    type Made =
      { job_id: string } | { pipeline_id: string } | { schedule_id: string };
    const showMade = (made: Made) =>
      app.commands.execute(
        CommandIDs.openJobsPanel,
        'job_id' in made
          ? { jobId: made.job_id }
          : 'pipeline_id' in made
            ? { pipelineId: made.pipeline_id }
            : { scheduleId: made.schedule_id }
      );
    // A command on one file: nothing when the call names none; else its dialog
    // (loaded on first use), and what that made is brought forward.
    const runOn = async (
      path: string | null,
      dialog: (path: string) => Promise<Made | null>
    ): Promise<void> => {
      if (!path) {
        return;
      }
      const made = await dialog(path);
      if (made) {
        await showMade(made);
      }
    };

    // The notebook a call is about: args.path, the file browser's selection, or
    // the current notebook (the one whose toolbar was clicked).
    const notebookPath = (args: ReadonlyPartialJSONObject): string | null => {
      if (typeof args.path === 'string' && args.path) {
        return args.path;
      }
      if (args.source === 'filebrowser') {
        for (const item of fileBrowser?.selectedItems() ?? []) {
          if (item.type === 'notebook' || item.path.endsWith('.ipynb')) {
            return item.path;
          }
        }
        return null;
      }
      const current = app.shell.currentWidget;
      const panel =
        current && notebooks?.has(current)
          ? notebooks.find(widget => widget === current)
          : notebooks?.currentWidget;
      return panel?.context.path ?? null;
    };

    app.commands.addCommand(CommandIDs.runAsJob, {
      label: trans.__('Run as Job'),
      caption: trans.__(
        'Run the saved notebook as a batch job and follow it in the Jobs panel'
      ),
      icon: runAsJobIcon,
      describedBy: stringArgs(
        {
          path: trans.__('The notebook to run'),
          source: trans.__('Run the file browser’s selected notebook')
        },
        { source: ['filebrowser'] }
      ),
      isEnabled: args => notebookPath(args) !== null,
      execute: args =>
        runOn(notebookPath(args), async path => {
          const { runAsJob } = await import('./runAsJob/runAsJob');
          return runAsJob(context, path);
        })
    });
    notebooks?.currentChanged.connect(() =>
      app.commands.notifyCommandChanged(CommandIDs.runAsJob)
    );

    palette?.addItem({
      command: CommandIDs.runAsJob,
      category: trans.__('Run as Job')
    });

    app.commands.addCommand(CommandIDs.runPipeline, {
      label: trans.__('Run notebooks as a pipeline…'),
      caption: trans.__(
        'Arrange the open notebooks into stages and run them as a pipeline of jobs'
      ),
      icon: pipelineIcon,
      describedBy: stringArgs({}),
      isEnabled: () => (notebooks?.size ?? 0) > 0,
      execute: async () => {
        const panels: NotebookPanel[] = [];
        notebooks?.forEach(panel => {
          panels.push(panel);
        });
        const open: IOpenNotebook[] = await Promise.all(
          panels.map(async panel => ({
            path: panel.context.path,
            dirty: await hasUnsavedCells(panel, app.serviceManager.contents),
            save: () => panel.context.save()
          }))
        );
        const { runPipelineBuilder } = await import('./pipelines/runPipeline');
        const made = await runPipelineBuilder(context, open);
        if (made) {
          await showMade(made);
        }
      }
    });
    notebooks?.widgetAdded.connect(() =>
      app.commands.notifyCommandChanged(CommandIDs.runPipeline)
    );

    // The template a call is about: args.path, or the file browser's selection.
    const templatePath = (args: ReadonlyPartialJSONObject): string | null => {
      if (typeof args.path === 'string' && args.path) {
        return args.path;
      }
      for (const item of fileBrowser?.selectedItems() ?? []) {
        if (/\.pipeline\.(ya?ml|json)$/i.test(item.path)) {
          return item.path;
        }
      }
      return null;
    };
    app.commands.addCommand(CommandIDs.runPipelineTemplate, {
      label: trans.__('Run Pipeline Template…'),
      caption: trans.__(
        'Run this saved pipeline again, with new pipeline-wide values'
      ),
      icon: pipelineIcon,
      describedBy: stringArgs({
        path: trans.__('The .pipeline.yaml or .pipeline.json file')
      }),
      isVisible: args => templatePath(args) !== null,
      isEnabled: args => templatePath(args) !== null,
      execute: args =>
        runOn(templatePath(args), async path => {
          const { runPipelineTemplate } =
            await import('./pipelines/runPipeline');
          return runPipelineTemplate(context, path);
        })
    });

    palette?.addItem({
      command: CommandIDs.runPipeline,
      category: trans.__('Run as Job')
    });
  }
};

/**
 * The Jobs panel: the user's jobs with their status, progress and logs, restored
 * on reload. It is reached from the left sidebar's Jobs tab (a narrow list of the
 * jobs, restored with the layout), the View menu (declared in schema/plugin.json),
 * the launcher's Jobs card and the command palette.
 */
const jobsPanelPlugin: JupyterFrontEndPlugin<void> = {
  id: '@campus-gpu-hub/jupyter-to-job:jobs-panel',
  description: 'The Jobs panel: follow, stop, rerun and open your jobs.',
  autoStart: true,
  optional: [
    ILayoutRestorer,
    IDocumentManager,
    ICommandPalette,
    ILauncher,
    ITranslator
  ],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    docManager: IDocumentManager | null,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const tracker = new WidgetTracker<MainAreaWidget<JobsPanel>>({
      namespace: 'jupyter-to-job'
    });
    let panel: Promise<MainAreaWidget<JobsPanel>> | null = null;
    // A notification when one of the user's jobs ends while the lab is open.
    let jobEnds: { refresh(): Promise<void> } | null = null;
    void import('./jobs/jobEnds').then(({ createJobEndWatcher }) => {
      jobEnds = createJobEndWatcher(
        app.serviceManager.serverSettings,
        jobId => app.commands.execute(CommandIDs.openJobsPanel, { jobId }),
        trans
      );
    });

    const createPanel = async (): Promise<MainAreaWidget<JobsPanel>> => {
      const { createJobsPanel } = await import('./jobs/jobsPanel');
      const created = createJobsPanel({
        serverSettings: app.serviceManager.serverSettings,
        docManager,
        contents: app.serviceManager.contents,
        trans,
        newPipeline: app.commands.hasCommand(CommandIDs.runPipeline)
          ? () => void app.commands.execute(CommandIDs.runPipeline)
          : null,
        openTensorBoard: app.commands.hasCommand(CommandIDs.openTensorBoard)
          ? folder =>
              void app.commands.execute(CommandIDs.openTensorBoard, { folder })
          : null
      });
      created.disposed.connect(() => {
        panel = null;
      });
      await tracker.add(created);
      return created;
    };

    const openPanel = async (): Promise<MainAreaWidget<JobsPanel>> => {
      // One panel: a second call while the first is loading waits for it.
      panel = panel ?? createPanel();
      const opened = await panel;
      if (!opened.isAttached) {
        app.shell.add(opened, 'main');
      }
      app.shell.activateById(opened.id);
      return opened;
    };

    app.commands.addCommand(CommandIDs.openJobsPanel, {
      label: trans.__('Jobs'),
      caption: trans.__('Show your Run as Job jobs and their status'),
      icon: jobsIcon,
      describedBy: stringArgs({
        jobId: trans.__('The job to select'),
        scheduleId: trans.__('The schedule to show'),
        pipelineId: trans.__('The pipeline to show')
      }),
      execute: async args => {
        const opened = await openPanel();
        if (typeof args.jobId === 'string' && args.jobId) {
          void jobEnds?.refresh(); // a job just submitted is watched from now on
          opened.content.showTab('jobs');
          await opened.content.model.showJob(args.jobId);
        } else if (typeof args.scheduleId === 'string' && args.scheduleId) {
          await opened.content.showSchedule(args.scheduleId);
        } else if (typeof args.pipelineId === 'string' && args.pipelineId) {
          await opened.content.showPipeline(args.pipelineId);
        }
      }
    });

    palette?.addItem({
      command: CommandIDs.openJobsPanel,
      category: trans.__('Run as Job')
    });

    void restorer?.restore(tracker, {
      command: CommandIDs.openJobsPanel,
      name: () => 'jobs'
    });

    launcher?.add({
      command: CommandIDs.openJobsPanel,
      category: trans.__('Other'),
      rank: 10
    });

    // The left sidebar's Jobs tab; its list is loaded with the rest of the panel's
    // code, after the start.
    void Promise.all([
      import('./jobs/jobsSidebar'),
      import('./jobs/jobsModel'),
      import('./common/api')
    ]).then(([{ createJobsSidebar }, { JobsModel }, { JobsAPI }]) => {
      const sidebar = createJobsSidebar({
        model: new JobsModel({
          api: new JobsAPI(app.serviceManager.serverSettings)
        }),
        openPanel: jobId =>
          void app.commands.execute(
            CommandIDs.openJobsPanel,
            jobId ? { jobId } : {}
          ),
        trans
      });
      app.shell.add(sidebar, 'left', { rank: 650, type: 'Jobs' });
      restorer?.add(sidebar, 'jupyter-to-job-sidebar');
    });
  }
};

/**
 * The status bar item: the server's GPU share and the time left in the class.
 */
const sessionStatusPlugin: JupyterFrontEndPlugin<void> = {
  id: '@campus-gpu-hub/jupyter-to-job:session-status',
  description:
    'Show the GPU share of this server and the time left in the course session, ' +
    "and the hub's warning before it reclaims the server.",
  autoStart: true,
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, statusBar: IStatusBar | null): void => {
    // Loaded after the start, so they do not hold it up.
    void Promise.all([
      import('./session/sessionStatus'),
      import('./session/reclaimWarning')
    ]).then(([{ createSessionStatus }, { createReclaimWatcher }]) => {
      // The hub's reclaim warning: a notification, the status bar, and a save of
      // open documents just before the server stops.
      const watcher = createReclaimWatcher(app);
      if (!statusBar) {
        return;
      }
      const { item, model } = createSessionStatus(
        app.serviceManager.serverSettings,
        app.commands
      );
      watcher.changed.connect((_, read) => {
        model.reclaim = read;
      });
      statusBar.registerStatusItem(
        '@campus-gpu-hub/jupyter-to-job:session-status',
        {
          item,
          align: 'left',
          rank: 100,
          isActive: () => model.session !== null,
          activeStateChanged: model.stateChanged
        }
      );
    });
  }
};

/**
 * TensorBoard: "Open TensorBoard" in the launcher and the command palette, over a
 * folder the person picks (runs/ unless they say otherwise), and each job's
 * TensorBoard from its card in the Jobs panel. Its tabs are restored on reload.
 */
const tensorboardPlugin: JupyterFrontEndPlugin<void> = {
  id: '@campus-gpu-hub/jupyter-to-job:tensorboard',
  description:
    'Open TensorBoard over a folder of your files, or over a job’s folder.',
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette, ILauncher, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    const tracker = new WidgetTracker<MainAreaWidget>({
      namespace: 'jupyter-to-job-tensorboard'
    });

    app.commands.addCommand(CommandIDs.openTensorBoard, {
      label: args =>
        typeof args.folder === 'string'
          ? trans.__('TensorBoard')
          : trans.__('Open TensorBoard…'),
      caption: trans.__(
        'Open TensorBoard over a folder of your files (runs/ unless you pick another)'
      ),
      icon: args => (args.isPalette ? undefined : tensorboardIcon),
      describedBy: stringArgs({
        folder: trans.__(
          'The folder with the event files, relative to your files; without it, a dialog asks'
        )
      }),
      execute: async args => {
        const { askFolder, openTensorBoard: open } =
          await import('./tensorboard/tensorboard');
        const folder =
          typeof args.folder === 'string'
            ? args.folder
            : await askFolder(trans);
        if (folder === null) {
          return;
        }
        await open(
          {
            serverSettings: app.serviceManager.serverSettings,
            trans,
            find: id => tracker.find(tab => tab.id === id) ?? null,
            add: tab => {
              void tracker.add(tab);
              app.shell.add(tab, 'main');
            },
            activate: id => app.shell.activateById(id)
          },
          folder
        );
      }
    });

    palette?.addItem({
      command: CommandIDs.openTensorBoard,
      category: trans.__('Run as Job')
    });
    launcher?.add({
      command: CommandIDs.openTensorBoard,
      category: trans.__('Other'),
      rank: 11
    });
    void restorer?.restore(tracker, {
      command: CommandIDs.openTensorBoard,
      args: tab => ({ folder: tab.node.dataset.folder ?? '' }),
      name: tab => tab.node.dataset.folder ?? ''
    });
  }
};

export default [
  runAsJobPlugin,
  jobsPanelPlugin,
  sessionStatusPlugin,
  tensorboardPlugin
];
