/**
 * Following a job's log: read on from the last offset on every poll until the server
 * says the log is complete, keeping only the newest window of it in the page.
 */
import { LogBuffer } from './logBuffer';
import { LogProgressReader } from './logProgress';
import { IJobLogChunk } from '../common/models';

/**
 * Read `limit` bytes of the job's log from `offset` (the job API's `logs` end point).
 */
export type FetchLogChunk = (
  offset: number,
  limit: number
) => Promise<IJobLogChunk>;

/**
 * The bytes one step of reading the earlier part of a log reads (a few reads).
 */
const EARLIER_PIECE = 1024 * 1024;

/**
 * How a follower reads.
 */
export interface ILogFollowerOptions {
  /**
   * The most characters to keep while following (default 32 Mi: the log view shows
   * only the lines in view, so the page holds the text, not a node per line).
   */
  window?: number;
  /**
   * How much of the end of a long log to read first, in bytes (default 256 KiB, or
   * `window` when smaller): the end shows at once, earlier text follows.
   */
  tail?: number;
  /**
   * The most bytes to ask for in one read (default 256 KiB, the job service's
   * largest read; the server may send less).
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
    this._window = options.window ?? 32 * 1024 * 1024;
    this._readLimit = options.readLimit ?? 256 * 1024;
    this._maxReads = options.maxReadsPerPoll ?? 16;
    const tail = Math.min(options.tail ?? 256 * 1024, this._window);
    const size = options.knownSize ?? 0;
    this.buffer = new LogBuffer(this._window, size > tail ? size - tail : 0);
  }

  /**
   * The text held and its offsets.
   */
  readonly buffer: LogBuffer;

  /**
   * How far the job got, as the lines read so far tell (read as they come, so the
   * Jobs panel's status moves with the log it shows).
   */
  readonly progress = new LogProgressReader();

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
   * Read the next piece of the text before the window, while it fits
   * (`fillsEarlier`).
   *
   * @returns Whether earlier text was added.
   */
  async fillEarlier(): Promise<boolean> {
    if (!this.fillsEarlier || this._filling) {
      return false;
    }
    this._filling = true;
    try {
      return await this.loadEarlier(EARLIER_PIECE);
    } finally {
      this._filling = false;
    }
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
        this.progress.read(chunk.data);
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
   * True while the text before the window would still fit in it: the log view
   * reads it on its own, a piece at a time, so that search and "jump to first
   * error" see the whole log. Beyond that, "Load earlier" reads it on request.
   */
  get fillsEarlier(): boolean {
    const buffer = this.buffer;
    return (
      buffer.hasEarlier &&
      buffer.length + Math.min(buffer.start, EARLIER_PIECE) <= this._window &&
      buffer.lineCount < buffer.maxLines * 0.9
    );
  }

  /**
   * Read up to `bytes` (default: 4 MiB, or a window when smaller) before the text
   * held and put them in front of it.
   *
   * @returns Whether earlier text was added.
   */
  async loadEarlier(
    bytes = Math.min(this._window, 4 * EARLIER_PIECE)
  ): Promise<boolean> {
    const end = this.buffer.start;
    if (end <= 0) {
      return false;
    }
    const start = Math.max(0, end - bytes);
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
  private _filling = false;
  private _complete = false;
  private _busy = false;
  private _loaded = false;
}
