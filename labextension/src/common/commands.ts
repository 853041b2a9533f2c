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

  /**
   * Open the pipeline builder over the open notebooks ("Run notebooks as a pipeline…").
   */
  export const runPipeline = 'jupyter-to-job:run-pipeline';

  /**
   * Run a saved pipeline template (`args.path`, or the file browser's selection)
   * again with new pipeline-wide values.
   */
  export const runPipelineTemplate = 'jupyter-to-job:run-pipeline-template';

  /**
   * Open TensorBoard over a folder of the user's files (`args.folder`; without it,
   * a dialog asks, offering `runs`).
   */
  export const openTensorBoard = 'jupyter-to-job:open-tensorboard';
}
