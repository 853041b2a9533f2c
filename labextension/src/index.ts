import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { CommandIDs } from './commands';
import { createJobsPanel } from './jobsPanel';

/**
 * The translation domain of the extension (its Python package name).
 */
const TRANSLATION_DOMAIN = 'jupyter_to_job';

/**
 * Run as Job: the Jobs panel and the commands that open it.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: '@campus-gpu-hub/jupyter-to-job:plugin',
  description:
    'Run the open notebook as a batch GPU job and follow it in the Jobs panel.',
  autoStart: true,
  optional: [ICommandPalette, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
    let jobsPanel: MainAreaWidget<Widget> | null = null;

    app.commands.addCommand(CommandIDs.openJobsPanel, {
      label: trans.__('Jobs'),
      caption: trans.__('Show your Run as Job jobs and their status'),
      describedBy: { args: { type: 'object', properties: {} } },
      execute: () => {
        if (!jobsPanel || jobsPanel.isDisposed) {
          jobsPanel = createJobsPanel(trans.__('Jobs'));
        }
        if (!jobsPanel.isAttached) {
          app.shell.add(jobsPanel, 'main');
        }
        app.shell.activateById(jobsPanel.id);
      }
    });

    palette?.addItem({
      command: CommandIDs.openJobsPanel,
      category: trans.__('Run as Job')
    });
  }
};

export default plugin;
