/**
 * Command IDs of the Run as Job extension; the prefix is the package short name.
 */
export namespace CommandIDs {
  /**
   * Run a saved notebook as a job: the notebook of the toolbar or the palette, or
   * the file browser's selection (args `{"source": "filebrowser"}`), or `args.path`.
   */
  export const runAsJob = 'jupyter-to-job:run-as-job';

  /**
   * Open (or bring forward) the Jobs panel in the main area; with `args.jobId`,
   * select that job.
   */
  export const openJobsPanel = 'jupyter-to-job:open-jobs-panel';
}
