/**
 * Command IDs of the Run as Job extension; the prefix is the package short name.
 */
export namespace CommandIDs {
  /**
   * Open (or bring forward) the Jobs panel in the main area.
   */
  export const openJobsPanel = 'jupyter-to-job:open-jobs-panel';
}
