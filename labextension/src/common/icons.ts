import { LabIcon } from '@jupyterlab/ui-components';

/**
 * An icon of this extension, named jupyter-to-job:`name` (a LabIcon's name is
 * unique in the lab): `shapes` drawn on a 24-unit square, shown at 16 pixels in
 * the theme's icon colour (`jp-icon3`).
 */
function icon(name: string, shapes: string[]): LabIcon {
  const svgstr = [
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">',
    '  <g class="jp-icon3" fill="#616161">',
    ...shapes.map(shape => `    ${shape}`),
    '  </g>',
    '</svg>'
  ].join('\n');
  return new LabIcon({ name: `jupyter-to-job:${name}`, svgstr });
}

/**
 * The icon of the Run as Job command (notebook toolbar, menus, palette): a
 * notebook page with a play mark.
 */
export const runAsJobIcon = icon('run-as-job', [
  '<path d="M5 2h10l5 5v6h-2V8h-4V4H7v16h5v2H5z"/>',
  '<path d="M14 13.5v8l6.5-4z"/>'
]);

/**
 * The icon of the Jobs panel's tab: a list with status dots.
 */
export const jobsIcon = icon('jobs', [
  '<circle cx="5" cy="6" r="2"/>',
  '<circle cx="5" cy="12" r="2"/>',
  '<circle cx="5" cy="18" r="2"/>',
  '<path d="M9 5h12v2H9zM9 11h12v2H9zM9 17h12v2H9z"/>'
]);

/**
 * The icon of the pipeline commands: three boxes joined left to right, two side
 * by side in the middle.
 */
export const pipelineIcon = icon('pipeline', [
  '<rect x="1" y="9" width="6" height="6" rx="1"/>',
  '<rect x="9" y="3" width="6" height="6" rx="1"/>',
  '<rect x="9" y="15" width="6" height="6" rx="1"/>',
  '<rect x="17" y="9" width="6" height="6" rx="1"/>',
  '<path d="M7 11.2h2v1.6H7zM15 11.2h2v1.6h-2zM11.2 9h1.6v6h-1.6z"/>'
]);

/**
 * The icon of the Open TensorBoard command and of TensorBoard tabs: a rising
 * curve on axes (training curves).
 */
export const tensorboardIcon = icon('tensorboard', [
  '<path d="M3 3h2v16h16v2H3z"/>',
  '<path d="M7 16.5l4.2-6 3.3 3 5-7.5 1.7 1.1-6.3 9.4-3.3-3-3 4.2z"/>'
]);
