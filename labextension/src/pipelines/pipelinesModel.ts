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
export class PipelinesModel extends ItemListModel<IDescribePipeline> {
  constructor(options: IPipelinesModelOptions) {
    super({
      name: '@campus-gpu-hub/jupyter-to-job:pipelines',
      interval: options.refreshInterval ?? 2000
    });
    this.api = options.api;
  }

  readonly api: IPipelinesModelOptions['api'];

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

  /**
   * Delete a finished pipeline (its jobs stay in the Jobs tab).
   */
  remove(pipeline: IDescribePipeline): Promise<void> {
    return this.actOn(pipeline, async () => {
      await this.api.deletePipeline(pipeline.pipeline_id);
      this.drop(pipeline);
    });
  }

  protected idOf(pipeline: IDescribePipeline): string {
    return pipeline.pipeline_id;
  }

  protected list(): Promise<IDescribePipeline[]> {
    return this.api.listPipelines();
  }

  protected keepsPolling(): boolean {
    return this.transient || hasUnfinishedPipelines(this.items);
  }

  protected shown(): void {
    this.poll.refresh();
  }
}
