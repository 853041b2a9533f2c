import { MainAreaWidget } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

/**
 * The DOM id of the Jobs panel; there is at most one.
 */
export const JOBS_PANEL_ID = 'jp-JupyterToJob-jobsPanel';

/**
 * Create the Jobs panel shown in the main area.
 *
 * The content is a placeholder until the jobs list is built.
 *
 * @param label The tab title, already translated.
 */
export function createJobsPanel(label: string): MainAreaWidget<Widget> {
  const content = new Widget();
  content.addClass('jp-JupyterToJob-JobsPanel-content');

  const panel = new MainAreaWidget({ content });
  panel.id = JOBS_PANEL_ID;
  panel.addClass('jp-JupyterToJob-JobsPanel');
  panel.title.label = label;
  panel.title.closable = true;
  return panel;
}
