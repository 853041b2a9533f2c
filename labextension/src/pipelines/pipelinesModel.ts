import { JobsAPI } from '../common/api';
import { IDescribePipeline } from './pipelineModels';
import { hasUnfinishedPipelines, pipelineRerunRequest } from './pipelineStatus';
import { ItemListModel } from '../common/pollingModel';

/**
 * How the Pipelines tab's model polls.
 */
export interface IPipelinesModelOptions {
  api: Pick<
    JobsAPI,
    'listPipelines' | 'stopPipeline' | 'deletePipeline' | 'createPipeline'
  >;
  /**
   * Milliseconds between refreshes while a pipeline is unfinished (default 2000).
   */
  refreshInterval?: number;
}

/**
 * The state of the Pipelines tab: the user's pipelines with their stages and jobs.
 * Like the job list, it refreshes while the tab is shown and some pipeline can
 * still change, and not otherwise.
 */
export class PipelinesModel extends ItemListModel<
  IDescribePipeline,
  IPipelinesModelOptions['api']
> {
  constructor(options: IPipelinesModelOptions) {
    super(options, { name: 'pipelines', interval: 2000, idKey: 'pipeline_id' });
  }

  /**
   * The user's pipelines, newest first.
   */
  get pipelines(): readonly IDescribePipeline[] {
    return this.items;
  }

  /**
   * Refresh, then bring `pipelineId` into view.
   */
  async show(pipelineId: string): Promise<void> {
    await super.show(pipelineId);
    this.poll.refresh();
  }

  /**
   * Stop a pipeline: its running jobs stop and the rest is skipped.
   */
  stop(pipeline: IDescribePipeline): Promise<void> {
    return this.actOn(pipeline, async () => {
      const stopped = await this.api.stopPipeline(pipeline.pipeline_id);
      // An answer without the pipeline: the next refresh brings it.
      if (stopped && typeof stopped.pipeline_id === 'string') {
        this.replace(stopped);
      }
      this.poll.refresh();
    });
  }

  /**
   * Run a finished pipeline again (from its template when it has one) and bring
   * the new one into view.
   */
  rerun(pipeline: IDescribePipeline): Promise<void> {
    return this.actOn(pipeline, async () => {
      const made = await this.api.createPipeline(
        pipelineRerunRequest(pipeline)
      );
      if (made && typeof made.pipeline_id === 'string') {
        this.prepend(made);
      }
      await this.refresh();
      this.poll.refresh();
    });
  }

  protected list(): Promise<IDescribePipeline[]> {
    return this.api.listPipelines();
  }

  /**
   * Delete a finished pipeline (its jobs stay in the Jobs tab).
   */
  protected erase(pipeline: IDescribePipeline): Promise<void> {
    return this.api.deletePipeline(pipeline.pipeline_id);
  }

  protected keepsPolling(): boolean {
    return this.transient || hasUnfinishedPipelines(this.items);
  }

  protected shown(): void {
    this.poll.refresh();
  }
}
