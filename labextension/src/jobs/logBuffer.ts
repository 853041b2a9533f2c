/**
 * The part of a job's log the Jobs panel holds: the text with the byte offsets it
 * spans, so that reading on (following) and reading back ("load earlier") ask the
 * server for exactly the bytes that are missing, and an index of its lines, so that
 * the log view can show any line of a 200,000-line log without splitting the text.
 */

/**
 * A piece of the log as the server sends it (the fields of `IJobLogChunk` used here).
 */
export interface ILogPiece {
  offset: number;
  next_offset: number;
  data: string;
}

/**
 * The number of bytes `text` takes in UTF-8.
 */
export function utf8ByteLength(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) {
      bytes += 1;
    } else if (code < 0x800) {
      bytes += 2;
    } else if (
      code >= 0xd800 &&
      code <= 0xdbff &&
      i + 1 < text.length &&
      (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00
    ) {
      bytes += 4; // a surrogate pair: one character outside the BMP
      i++;
    } else {
      bytes += 3;
    }
  }
  return bytes;
}

/**
 * Drop the partial first line of a piece read from the middle of the log.
 *
 * A read that starts mid-line may also start mid-character: the server decodes each
 * stray byte of that character as U+FFFD, so leading U+FFFD count one byte each.
 *
 * @returns The text from the first whole line on, and the bytes dropped before it;
 * null when the piece holds no line end (nothing whole to keep yet).
 */
export function fromFirstWholeLine(
  data: string
): { text: string; dropped: number } | null {
  const newline = data.indexOf('\n');
  if (newline < 0) {
    return null;
  }
  const head = data.slice(0, newline + 1);
  let stray = 0;
  while (stray < head.length && head.charCodeAt(stray) === 0xfffd) {
    stray++;
  }
  return {
    text: data.slice(newline + 1),
    dropped: stray + utf8ByteLength(head.slice(stray))
  };
}

/**
 * Where each line of `text` starts (0, then one past every line end but the last).
 * `text` ends with a line end; the result has one entry per line.
 */
export function lineStarts(text: string): Uint32Array {
  let count = 0;
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) {
    count++;
  }
  const starts = new Uint32Array(count);
  let line = 0;
  let start = 0;
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) {
    starts[line++] = start;
    start = at + 1;
  }
  return starts;
}

/**
 * The index of the last entry of the sorted `values` that is at most `value`
 * (-1 when none is).
 */
export function lastAtMost(
  values: ArrayLike<number>,
  value: number,
  length = values.length
): number {
  let low = 0;
  let high = length - 1;
  let found = -1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (values[middle] <= value) {
      found = middle;
      low = middle + 1;
    } else {
      high = middle - 1;
    }
  }
  return found;
}

/**
 * Whole lines of the log, kept as one string with the start of each line.
 */
interface ILineBlock {
  text: string;
  starts: Uint32Array;
}

/**
 * The most lines a buffer keeps by default (see the constructor).
 */
export const MAX_LINES = 1500000;

/**
 * Appends smaller than this are merged into the last block, so that a log read a
 * few lines at a time does not become thousands of blocks.
 */
const BLOCK_CHARACTERS = 64 * 1024;

/**
 * A window of a job's log, at most about `limit` characters, ending at the newest
 * text read. Older text is dropped from the front, a whole line at a time, as new
 * text arrives; `loadEarlier` in the follower puts it back on request.
 *
 * The text is held as blocks of whole lines, each with the start of its lines, and
 * the line being written (not ended yet) apart: `line(i)` is a slice, found by two
 * binary searches, so a view can show any line without splitting the whole log.
 */
export class LogBuffer {
  /**
   * @param limit The most characters to keep while following.
   * @param start The byte offset the window starts at: 0, or a point inside a long
   * log to show only its end (the partial first line is then dropped).
   * @param maxLines The most lines to keep while following: a browser cannot
   * scroll an area much taller than 30 million pixels, 1.6 million log lines.
   */
  constructor(limit: number, start = 0, maxLines = MAX_LINES) {
    if (!(limit > 0)) {
      throw new RangeError(`A log window must hold at least 1 character.`);
    }
    this._window = limit;
    this._limit = limit;
    this._maxLines = Math.max(1, maxLines);
    this._start = Math.max(0, start);
    this._end = this._start;
    this._alignFirstLine = this._start > 0;
  }

  /**
   * The text held, in log order (joined on each call: views read lines instead).
   */
  get text(): string {
    return this._blocks.map(block => block.text).join('') + this._open;
  }

  /**
   * The characters held.
   */
  get length(): number {
    return this._characters + this._open.length;
  }

  /**
   * The lines held; a last line still being written counts as one.
   */
  get lineCount(): number {
    return this._wholeLines + (this._open ? 1 : 0);
  }

  /**
   * Line `index` (0 is the first line held), without its line end; '' outside.
   */
  line(index: number): string {
    if (index < 0 || index >= this.lineCount) {
      return '';
    }
    if (index >= this._wholeLines) {
      return this._open;
    }
    const b = lastAtMost(this._firstLines, index);
    const block = this._blocks[b];
    const i = index - this._firstLines[b];
    const end =
      i + 1 < block.starts.length ? block.starts[i + 1] : block.text.length;
    return block.text.slice(block.starts[i], end - 1);
  }

  /**
   * The blocks of whole lines and the line each starts with, then the open line,
   * for searches that read the text a block at a time.
   */
  blocks(): { text: string; starts: Uint32Array; firstLine: number }[] {
    const blocks = this._blocks.map((block, b) => ({
      text: block.text,
      starts: block.starts,
      firstLine: this._firstLines[b]
    }));
    if (this._open) {
      blocks.push({
        text: this._open,
        starts: Uint32Array.of(0),
        firstLine: this._wholeLines
      });
    }
    return blocks;
  }

  /**
   * The most lines kept while following.
   */
  get maxLines(): number {
    return this._maxLines;
  }

  /**
   * Counts every change, for views that redraw when it moves.
   */
  get version(): number {
    return this._version;
  }

  /**
   * Lines put in front since the buffer was made, less those dropped from the
   * front: how far line numbers moved, for a view that keeps its place.
   */
  get shift(): number {
    return this._shift;
  }

  /**
   * The byte offset of the first character held.
   */
  get start(): number {
    return this._start;
  }

  /**
   * The byte offset right after the last character held: where to read on.
   */
  get end(): number {
    return this._end;
  }

  /**
   * True when the log has text before the window ("load earlier" has work to do).
   */
  get hasEarlier(): boolean {
    return this._start > 0;
  }

  /**
   * Add a piece read at `end`. Pieces that do not continue the window exactly
   * (a stale or repeated read) are ignored, so text is never doubled or reordered.
   *
   * @returns Whether the piece was taken.
   */
  append(piece: ILogPiece): boolean {
    if (piece.offset !== this._end || piece.next_offset < piece.offset) {
      return false;
    }
    this._end = piece.next_offset;
    let data = piece.data;
    if (this._alignFirstLine) {
      const whole = fromFirstWholeLine(this._pending + data);
      if (whole === null) {
        // Still inside the partial first line: hold it until its end arrives.
        this._pending += data;
        return true;
      }
      this._start += whole.dropped;
      this._pending = '';
      this._alignFirstLine = false;
      data = whole.text;
    }
    if (!data) {
      return true;
    }
    this._version++;
    const text = this._open + data;
    const lastEnd = text.lastIndexOf('\n');
    this._open = text.slice(lastEnd + 1);
    if (lastEnd >= 0) {
      this._addWholeLines(text.slice(0, lastEnd + 1));
    }
    this._trim();
    return true;
  }

  /**
   * Put back the text right before the window. It was read on request, so the
   * window grows to keep it, with room for `limit` more characters of new text.
   *
   * @returns Whether the piece was taken: it must end exactly at `start`.
   */
  prepend(piece: ILogPiece): boolean {
    if (
      piece.next_offset !== this._start ||
      piece.offset > this._start ||
      this._alignFirstLine
    ) {
      return false;
    }
    let data = piece.data;
    let start = piece.offset;
    if (start > 0) {
      const whole = fromFirstWholeLine(data);
      if (whole === null) {
        return false;
      }
      data = whole.text;
      start += whole.dropped;
    }
    if (data && !data.endsWith('\n')) {
      return false; // the held text starts on a line: what comes before ends one
    }
    this._start = start;
    if (data) {
      const block = { text: data, starts: lineStarts(data) };
      this._blocks.unshift(block);
      this._characters += data.length;
      this._shift += block.starts.length;
      this._version++;
      this._reindex();
    }
    // The user asked for this text: leave it, and room for a window of new text.
    this._limit = this.length + this._window;
    return true;
  }

  private _addWholeLines(text: string): void {
    const last = this._blocks[this._blocks.length - 1];
    if (last && last.text.length < BLOCK_CHARACTERS) {
      const merged = last.text + text;
      this._blocks[this._blocks.length - 1] = {
        text: merged,
        starts: lineStarts(merged)
      };
    } else {
      this._blocks.push({ text, starts: lineStarts(text) });
      this._firstLines.push(this._wholeLines);
    }
    this._characters += text.length;
    this._wholeLines = this._countLines();
  }

  private _trim(): void {
    let excess = this.length - this._limit;
    let excessLines = this.lineCount - this._maxLines;
    if (excess <= 0 && excessLines <= 0) {
      return;
    }
    // Drop whole lines from the front: whole blocks first, then the lines of the
    // first block that start before the excess is covered.
    let dropped = 0;
    let droppedLines = 0;
    while (this._blocks.length > 0 && (excess > 0 || excessLines > 0)) {
      const block = this._blocks[0];
      const lines = block.starts.length;
      if (block.text.length <= excess || lines <= excessLines) {
        this._blocks.shift();
        dropped += utf8ByteLength(block.text);
        droppedLines += lines;
        excess -= block.text.length;
        excessLines -= lines;
        this._characters -= block.text.length;
        continue;
      }
      const cutLine = Math.max(
        excess > 0 ? lastAtMost(block.starts, excess - 1) + 1 : 0,
        excessLines
      );
      if (cutLine >= lines) {
        excess = block.text.length; // the excess ends in its last line: drop it all
        continue;
      }
      const cut = block.starts[cutLine];
      const head = block.text.slice(0, cut);
      const rest = block.text.slice(cut);
      this._blocks[0] = { text: rest, starts: lineStarts(rest) };
      dropped += utf8ByteLength(head);
      droppedLines += cutLine;
      this._characters -= head.length;
      excess = 0;
      excessLines = 0;
    }
    this._start += dropped;
    this._shift -= droppedLines;
    this._reindex();
  }

  private _reindex(): void {
    this._firstLines = [];
    let lines = 0;
    for (const block of this._blocks) {
      this._firstLines.push(lines);
      lines += block.starts.length;
    }
    this._wholeLines = lines;
  }

  private _countLines(): number {
    const b = this._blocks.length - 1;
    return b < 0 ? 0 : this._firstLines[b] + this._blocks[b].starts.length;
  }

  private _blocks: ILineBlock[] = [];
  private _firstLines: number[] = [];
  private _wholeLines = 0;
  private _characters = 0;
  private _open = '';
  private _pending = '';
  private _version = 0;
  private _shift = 0;
  private _start: number;
  private _end: number;
  private _limit: number;
  private readonly _window: number;
  private readonly _maxLines: number;
  private _alignFirstLine: boolean;
}
