import { LabIcon } from '@jupyterlab/ui-components';

/**
 * A notebook page with a play mark: "run this notebook as a job".
 */
const RUN_AS_JOB_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M5 2h10l5 5v6h-2V8h-4V4H7v16h5v2H5z"/>
    <path d="M14 13.5v8l6.5-4z"/>
  </g>
</svg>`;

/**
 * A list with status dots: the Jobs panel.
 */
const JOBS_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <circle cx="5" cy="6" r="2"/>
    <circle cx="5" cy="12" r="2"/>
    <circle cx="5" cy="18" r="2"/>
    <path d="M9 5h12v2H9zM9 11h12v2H9zM9 17h12v2H9z"/>
  </g>
</svg>`;

/**
 * Three boxes joined left to right, two side by side in the middle: a pipeline.
 */
const PIPELINE_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <rect x="1" y="9" width="6" height="6" rx="1"/>
    <rect x="9" y="3" width="6" height="6" rx="1"/>
    <rect x="9" y="15" width="6" height="6" rx="1"/>
    <rect x="17" y="9" width="6" height="6" rx="1"/>
    <path d="M7 11.2h2v1.6H7zM15 11.2h2v1.6h-2zM11.2 9h1.6v6h-1.6z"/>
  </g>
</svg>`;

/**
 * A rising curve on axes: TensorBoard's training curves.
 */
const TENSORBOARD_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M3 3h2v16h16v2H3z"/>
    <path d="M7 16.5l4.2-6 3.3 3 5-7.5 1.7 1.1-6.3 9.4-3.3-3-3 4.2z"/>
  </g>
</svg>`;

/**
 * An icon of this extension, named jupyter-to-job:`name` (a LabIcon's name is
 * unique in the lab).
 */
function icon(name: string, svgstr: string): LabIcon {
  return new LabIcon({ name: `jupyter-to-job:${name}`, svgstr });
}

/**
 * The icon of the Run as Job command (notebook toolbar, menus, palette).
 */
export const runAsJobIcon = icon('run-as-job', RUN_AS_JOB_SVG);

/**
 * The icon of the Jobs panel's tab.
 */
export const jobsIcon = icon('jobs', JOBS_SVG);

/**
 * The icon of the pipeline commands.
 */
export const pipelineIcon = icon('pipeline', PIPELINE_SVG);

/**
 * The icon of the Open TensorBoard command and of TensorBoard tabs.
 */
export const tensorboardIcon = icon('tensorboard', TENSORBOARD_SVG);
