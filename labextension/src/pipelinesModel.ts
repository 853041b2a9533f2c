import { VDomModel } from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';

import { JobsAPI } from './api';
import { errorSentence, isTransient, unavailableSentence } from './errors';
import { IDescribePipeline } from './pipelineModels';
import { hasUnfinishedPipelines, pipelineRerunRequest } from './pipelineStatus';

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
export class PipelinesModel extends VDomModel {
  constructor(options: IPipelinesModelOptions) {
    super();
    this.api = options.api;
    this._poll = new Poll({
      factory: () => this.refresh(),
      frequency: { interval: options.refreshInterval ?? 2000, backoff: false },
      name: '@campus-gpu-hub/jupyter-to-job:pipelines',
      standby: () =>
        !this._visible ||
        !(this._transient || hasUnfinishedPipelines(this._pipelines))
    });
  }

  readonly api: IPipelinesModelOptions['api'];

  /**
   * The user's pipelines, newest first.
   */
  get pipelines(): readonly IDescribePipeline[] {
    return this._pipelines;
  }

  get loaded(): boolean {
    return this._loaded;
  }

  /**
   * Why the list cannot be shown, as a sentence; null when the last refresh worked.
   */
  get message(): string | null {
    return this._message;
  }

  /**
   * The sentence of the last failed stop or delete.
   */
  get actionError(): string | null {
    return this._actionError;
  }

  /**
   * The pipeline an action is under way for, or null.
   */
  get busyId(): string | null {
    return this._busyId;
  }

  /**
   * The pipeline to bring into view (just created, or named by a link).
   */
  get highlighted(): string | null {
    return this._highlighted;
  }

  get now(): Date {
    return this._now;
  }

  get visible(): boolean {
    return this._visible;
  }
  set visible(visible: boolean) {
    if (this._visible === visible) {
      return;
    }
    this._visible = visible;
    if (visible) {
      void this.refresh();
      this._poll.refresh();
    }
  }

  /**
   * Fetch the pipelines now.
   */
  refresh(): Promise<void> {
    if (!this._refreshing) {
      this._refreshing = this._refresh().finally(() => {
        this._refreshing = null;
      });
    }
    return this._refreshing;
  }

  /**
   * Refresh, then bring `pipelineId` into view.
   */
  async show(pipelineId: string): Promise<void> {
    this._highlighted = pipelineId;
    await this.refresh();
    this._poll.refresh();
  }

  /**
   * Stop a pipeline: its running jobs stop and the rest is skipped.
   */
  stop(pipeline: IDescribePipeline): Promise<void> {
    return this._act(pipeline, async () => {
      this._replace(await this.api.stopPipeline(pipeline.pipeline_id));
      this._poll.refresh();
    });
  }

  /**
   * Run a finished pipeline again (from its template when it has one) and bring
   * the new one into view.
   */
  rerun(pipeline: IDescribePipeline): Promise<void> {
    return this._act(pipeline, async () => {
      const made = await this.api.createPipeline(
        pipelineRerunRequest(pipeline)
      );
      if (made && typeof made.pipeline_id === 'string') {
        this._pipelines = [made, ...this._pipelines];
        this._highlighted = made.pipeline_id;
      }
      await this.refresh();
      this._poll.refresh();
    });
  }

  /**
   * Delete a finished pipeline (its jobs stay in the Jobs tab).
   */
  remove(pipeline: IDescribePipeline): Promise<void> {
    return this._act(pipeline, async () => {
      await this.api.deletePipeline(pipeline.pipeline_id);
      this._pipelines = this._pipelines.filter(
        item => item.pipeline_id !== pipeline.pipeline_id
      );
    });
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    super.dispose();
  }

  private _replace(pipeline: IDescribePipeline): void {
    if (!pipeline || typeof pipeline.pipeline_id !== 'string') {
      return; // an answer without the pipeline: the next refresh brings it
    }
    this._pipelines = this._pipelines.map(item =>
      item.pipeline_id === pipeline.pipeline_id ? pipeline : item
    );
  }

  private async _act(
    pipeline: IDescribePipeline,
    work: () => Promise<void>
  ): Promise<void> {
    if (this._busyId) {
      return;
    }
    this._busyId = pipeline.pipeline_id;
    this._actionError = null;
    this.stateChanged.emit();
    try {
      await work();
    } catch (reason) {
      this._actionError = errorSentence(reason);
    } finally {
      this._busyId = null;
      if (!this.isDisposed) {
        this.stateChanged.emit();
      }
    }
  }

  private async _refresh(): Promise<void> {
    try {
      this._pipelines = await this.api.listPipelines();
      this._message = null;
      this._transient = false;
    } catch (reason) {
      this._message = unavailableSentence(reason);
      this._transient = isTransient(reason);
    }
    if (this.isDisposed) {
      return;
    }
    this._loaded = true;
    this._now = new Date();
    this.stateChanged.emit();
  }

  private _poll: Poll;
  private _pipelines: IDescribePipeline[] = [];
  private _loaded = false;
  private _message: string | null = null;
  private _transient = false;
  private _actionError: string | null = null;
  private _busyId: string | null = null;
  private _highlighted: string | null = null;
  private _now = new Date();
  private _visible = false;
  private _refreshing: Promise<void> | null = null;
}
