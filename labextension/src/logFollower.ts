/**
 * Following a job's log: read on from the last offset on every poll until the server
 * says the log is complete, keeping only the newest window of it in the page.
 */
import { LogBuffer } from './logBuffer';
import { IJobLogChunk } from './models';

/**
 * Read `limit` bytes of the job's log from `offset` (the job API's `logs` end point).
 */
export type FetchLogChunk = (
  offset: number,
  limit: number
) => Promise<IJobLogChunk>;

/**
 * How a follower reads.
 */
export interface ILogFollowerOptions {
  /**
   * The most characters to keep while following (default 128 Ki).
   */
  window?: number;
  /**
   * The most bytes to ask for in one read (default 64 KiB; the server may send less).
   */
  readLimit?: number;
  /**
   * The most reads one poll makes, so a fast-growing log cannot hold a poll forever
   * (default 16).
   */
  maxReadsPerPoll?: number;
  /**
   * The log's size when the job was last described (`log_size`): a log longer than
   * the window is read from its last `window` bytes on.
   */
  knownSize?: number;
}

/**
 * Follows one job's log. `poll()` is called on a timer by the Jobs panel; it does
 * nothing once the log is complete, and overlapping calls do not read twice.
 */
export class LogFollower {
  constructor(fetchChunk: FetchLogChunk, options: ILogFollowerOptions = {}) {
    this._fetch = fetchChunk;
    this._window = options.window ?? 128 * 1024;
    this._readLimit = options.readLimit ?? 64 * 1024;
    this._maxReads = options.maxReadsPerPoll ?? 16;
    const size = options.knownSize ?? 0;
    this.buffer = new LogBuffer(
      this._window,
      size > this._window ? size - this._window : 0
    );
  }

  /**
   * The text held and its offsets.
   */
  readonly buffer: LogBuffer;

  /**
   * True once the job has finished and its whole log has been read.
   */
  get complete(): boolean {
    return this._complete;
  }

  /**
   * True until the first poll has answered (the view says "Loading the log…").
   */
  get loading(): boolean {
    return !this._loaded;
  }

  /**
   * Read what was written since the last poll.
   *
   * @returns Whether the text changed (or the log became complete).
   * @throws What the fetch throws; the next poll reads from the same offset.
   */
  async poll(): Promise<boolean> {
    if (this._complete || this._busy) {
      return false;
    }
    this._busy = true;
    let changed = false;
    try {
      for (let read = 0; read < this._maxReads; read++) {
        const chunk = await this._fetch(this.buffer.end, this._readLimit);
        this._loaded = true;
        if (!this.buffer.append(chunk)) {
          break; // not where we asked (the log went away): try again next poll
        }
        changed = changed || chunk.data.length > 0;
        if (chunk.complete) {
          this._complete = true;
          changed = true;
          break;
        }
        if (chunk.data.length === 0 || chunk.next_offset >= chunk.size) {
          break; // caught up with the writer
        }
      }
    } finally {
      this._loaded = true;
      this._busy = false;
    }
    return changed;
  }

  /**
   * Read the `window` bytes before the text held and put them in front of it.
   *
   * @returns Whether earlier text was added.
   */
  async loadEarlier(): Promise<boolean> {
    const end = this.buffer.start;
    if (end <= 0) {
      return false;
    }
    const start = Math.max(0, end - this._window);
    let data = '';
    let position = start;
    while (position < end) {
      const chunk = await this._fetch(position, end - position);
      if (chunk.offset !== position || chunk.next_offset <= position) {
        return false;
      }
      data += chunk.data;
      position = chunk.next_offset;
    }
    return this.buffer.prepend({ offset: start, next_offset: end, data });
  }

  private _fetch: FetchLogChunk;
  private _window: number;
  private _readLimit: number;
  private _maxReads: number;
  private _complete = false;
  private _busy = false;
  private _loaded = false;
}
