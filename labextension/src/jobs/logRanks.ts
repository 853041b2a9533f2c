/**
 * The ranks of a multi-node job's log. Each pod's lines come prefixed `[rank N] `
 * (N from 0 to nodes - 1), interleaved in one log; the Jobs panel can show one
 * rank's lines alone. The filtering is done here, over the lines the panel holds,
 * and kept up to date as the log grows, so a followed log stays filtered.
 */
import { IDescribeJob } from '../common/models';
import { lastAtMost, LogBuffer } from './logBuffer';

/**
 * The prefix of a rank's line, as the multi-node runner writes it.
 */
const RANK_PREFIX = /^\[rank (\d+)\] /;

/**
 * The rank a line comes from, or null when it has no rank prefix.
 */
export function rankOf(line: string): number | null {
  const found = RANK_PREFIX.exec(line);
  return found ? Number(found[1]) : null;
}

/**
 * How many nodes (pods) a job runs on; a description without `nodes` (an older
 * server's) is one node's.
 */
export function nodesOf(job: IDescribeJob): number {
  return job.nodes !== undefined && job.nodes > 0 ? job.nodes : 1;
}

/**
 * The ranks the filter offers: 0 to nodes - 1 when the job says it has several
 * nodes, and every rank seen in the log besides, in order. Empty when the job
 * has one node and its log no rank prefix (no filter is shown then).
 */
export function ranksToOffer(
  nodes: number | null | undefined,
  seen: Iterable<number>
): number[] {
  const ranks = new Set<number>(seen);
  if ((nodes ?? 1) > 1) {
    for (let rank = 0; rank < (nodes as number); rank++) {
      ranks.add(rank);
    }
  }
  return [...ranks].sort((a, b) => a - b);
}

/**
 * The lines of one rank among the lines a buffer holds, and the ranks it has seen.
 *
 * `update` reads only what changed since it last ran: new lines at the end (the
 * line being written may have grown), and, when lines were put in front or dropped
 * from it, the whole buffer again. A view shows `lines[i]` as its line `i`.
 */
export class RankFilter {
  /**
   * @param rank The rank to keep, or null for every line (only ranks are counted).
   */
  constructor(readonly rank: number | null) {}

  /**
   * The buffer's lines (0-based, in order) of the rank (none without a rank).
   */
  get lines(): readonly number[] {
    return this._lines;
  }

  /**
   * Every rank seen in the lines read so far.
   */
  get seen(): ReadonlySet<number> {
    return this._seen;
  }

  /**
   * Catch up with `buffer`.
   *
   * @returns How many of the rank's lines came in front of those it had (lines
   * read back with "Load earlier"; negative when lines were dropped from the
   * front), so that a view can keep the same lines in sight.
   */
  update(buffer: LogBuffer): number {
    if (this._version === buffer.version) {
      return 0;
    }
    const moved = buffer.shift - this._shift;
    let inFront = 0;
    if (moved !== 0) {
      const old = this._lines;
      this._lines = [];
      this._read(buffer, 0);
      if (moved > 0 && old.length > 0) {
        // The rank's lines before the first one it had were put in front.
        inFront = lastAtMost(this._lines, old[0] + moved - 1) + 1;
      } else if (moved < 0) {
        // The rank's lines among those dropped from the front.
        inFront = -(lastAtMost(old, -moved - 1) + 1);
      }
    } else {
      // The last line read may have been the one being written: read it again.
      const from = Math.max(0, this._readTo - 1);
      while (
        this._lines.length > 0 &&
        this._lines[this._lines.length - 1] >= from
      ) {
        this._lines.pop();
      }
      this._read(buffer, from);
    }
    this._shift = buffer.shift;
    this._version = buffer.version;
    return inFront;
  }

  private _read(buffer: LogBuffer, from: number): void {
    const count = buffer.lineCount;
    for (let i = from; i < count; i++) {
      const rank = rankOf(buffer.line(i));
      if (rank !== null) {
        this._seen.add(rank);
      }
      if (this.rank !== null && rank === this.rank) {
        this._lines.push(i);
      }
    }
    this._readTo = count;
  }

  private _lines: number[] = [];
  private _seen = new Set<number>();
  private _shift = 0;
  private _version = -1;
  private _readTo = 0;
}
