import { VDomModel } from '@jupyterlab/ui-components';
import { Poll } from '@lumino/polling';

import { errorSentence, isTransient, unavailableSentence } from './errors';

/**
 * How a tab's model polls.
 */
export interface IPollingModelOptions {
  /**
   * The poll's name, for debugging.
   */
  name: string;
  /**
   * Milliseconds between refreshes while the tab is shown and something can change.
   */
  interval: number;
}

/**
 * The part the Jobs, Pipelines and Schedules tabs' models share: a refresh that
 * is never run twice at once, a poll that runs only while the tab is shown and
 * `keepsPolling()` says something can still change, the sentence of a failed
 * refresh, and one action at a time with the sentence of its failure.
 */
export abstract class PollingModel extends VDomModel {
  constructor(options: IPollingModelOptions) {
    super();
    this.poll = new Poll({
      factory: () => this.refresh(),
      frequency: { interval: options.interval, backoff: false },
      name: options.name,
      standby: () => !this._visible || !this.keepsPolling()
    });
  }

  /**
   * False until the first refresh has answered.
   */
  get loaded(): boolean {
    return this._loaded;
  }

  /**
   * Why the list cannot be shown (server extension missing, hub service down), as
   * the sentence to show; null when the last refresh worked.
   */
  get message(): string | null {
    return this._message;
  }

  /**
   * The sentence of the last failed action.
   */
  get actionError(): string | null {
    return this._actionError;
  }

  /**
   * The time the list was last refreshed.
   */
  get now(): Date {
    return this._now;
  }

  /**
   * Whether the tab is shown: the model polls only then.
   */
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
      this.shown();
    }
  }

  /**
   * Fetch now (joining a refresh under way).
   */
  refresh(): Promise<void> {
    if (!this._refreshing) {
      this._refreshing = this._refresh().finally(() => {
        this._refreshing = null;
      });
    }
    return this._refreshing;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.poll.dispose();
    super.dispose();
  }

  /**
   * Fetch the list and keep it; a throw becomes `message`.
   */
  protected abstract fetch(): Promise<void>;

  /**
   * Whether something shown can still change (default: always).
   */
  protected keepsPolling(): boolean {
    return true;
  }

  /**
   * Whether the last refresh failed in a way that may pass (server restarting).
   */
  protected get transient(): boolean {
    return this._transient;
  }

  /**
   * Called when the tab is shown again, after its refresh has begun.
   */
  protected shown(): void {
    // Nothing more by default.
  }

  /**
   * Called after a refresh has redrawn the tab.
   */
  protected afterRefresh(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * What an action is under way for ("stop", a pipeline's id...), or null.
   */
  protected get busy(): string | null {
    return this._busy;
  }

  /**
   * Run `work` unless another action is under way; its failure becomes
   * `actionError`.
   */
  protected async act(busy: string, work: () => Promise<void>): Promise<void> {
    if (this._busy) {
      return;
    }
    this._busy = busy;
    this._actionError = null;
    this.stateChanged.emit();
    try {
      await work();
    } catch (reason) {
      this._actionError = errorSentence(reason);
    } finally {
      this._busy = null;
      if (!this.isDisposed) {
        this.stateChanged.emit();
      }
    }
  }

  /**
   * Set (or clear, with null) the sentence of the last failed action.
   */
  protected setActionError(sentence: string | null): void {
    this._actionError = sentence;
  }

  protected readonly poll: Poll;

  private async _refresh(): Promise<void> {
    try {
      await this.fetch();
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
    await this.afterRefresh();
  }

  private _loaded = false;
  private _message: string | null = null;
  private _transient = false;
  private _actionError: string | null = null;
  private _busy: string | null = null;
  private _now = new Date();
  private _visible = false;
  private _refreshing: Promise<void> | null = null;
}

/**
 * How a list tab's model is made: the API it asks, and the milliseconds between
 * refreshes (each list has its default).
 */
export interface IItemListModelOptions<A> {
  api: A;
  refreshInterval?: number;
}

/**
 * What a kind of list fixes: its poll's name ("pipelines"), its refresh interval
 * by default, and the field of an item that holds its id.
 */
export interface IItemListKind<T> {
  name: string;
  interval: number;
  idKey: { [K in keyof T]: T[K] extends string ? K : never }[keyof T];
}

/**
 * A polling model of a list of things with ids (pipelines, schedules) that asks
 * the API `A`: one action at a time per item, and an item to bring into view.
 */
export abstract class ItemListModel<T, A> extends PollingModel {
  constructor(options: IItemListModelOptions<A>, kind: IItemListKind<T>) {
    super({
      name: `@campus-gpu-hub/jupyter-to-job:${kind.name}`,
      interval: options.refreshInterval ?? kind.interval
    });
    this.api = options.api;
    this._idKey = kind.idKey;
  }

  readonly api: A;

  /**
   * The item an action is under way for, or null.
   */
  get busyId(): string | null {
    return this.busy;
  }

  /**
   * The item to bring into view (just created, or named by a link).
   */
  get highlighted(): string | null {
    return this._highlighted;
  }

  /**
   * Refresh, then bring the item `id` into view.
   */
  async show(id: string): Promise<void> {
    this._highlighted = id;
    await this.refresh();
  }

  /**
   * Delete `item` on the server and drop it from the list.
   */
  remove(item: T): Promise<void> {
    return this.actOn(item, async () => {
      await this.erase(item);
      this.drop(item);
    });
  }

  protected idOf(item: T): string {
    return item[this._idKey] as string;
  }

  protected get items(): readonly T[] {
    return this._items;
  }

  protected async fetch(): Promise<void> {
    this._items = await this.list();
  }

  /**
   * The list from the server.
   */
  protected abstract list(): Promise<T[]>;

  /**
   * Delete `item` on the server.
   */
  protected abstract erase(item: T): Promise<void>;

  /**
   * Put `item` first and bring it into view.
   */
  protected prepend(item: T): void {
    this._items = [item, ...this._items];
    this._highlighted = this.idOf(item);
  }

  /**
   * Put the server's newer `item` in place of the one with its id.
   */
  protected replace(item: T): void {
    const id = this.idOf(item);
    this._items = this._items.map(old => (this.idOf(old) === id ? item : old));
  }

  protected drop(item: T): void {
    const id = this.idOf(item);
    this._items = this._items.filter(old => this.idOf(old) !== id);
  }

  protected actOn(item: T, work: () => Promise<void>): Promise<void> {
    return this.act(this.idOf(item), work);
  }

  private readonly _idKey: IItemListKind<T>['idKey'];
  private _items: T[] = [];
  private _highlighted: string | null = null;
}
