/**
 * The part of a job's log the Jobs panel holds: a window of text with the byte
 * offsets it spans, so that reading on (following) and reading back ("load
 * earlier") ask the server for exactly the bytes that are missing.
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
 * A window of a job's log, at most about `limit` characters, ending at the newest
 * text read. Older text is dropped from the front, at a line boundary, as new text
 * arrives; `loadEarlier` in the follower puts it back on request.
 */
export class LogBuffer {
  /**
   * @param limit The most characters to keep while following (the DOM's size).
   * @param start The byte offset the window starts at: 0, or a point inside a long
   * log to show only its end (the partial first line is then dropped).
   */
  constructor(limit: number, start = 0) {
    if (!(limit > 0)) {
      throw new RangeError(`A log window must hold at least 1 character.`);
    }
    this._window = limit;
    this._limit = limit;
    this._start = Math.max(0, start);
    this._end = this._start;
    this._alignFirstLine = this._start > 0;
  }

  /**
   * The text held, in log order.
   */
  get text(): string {
    return this._text;
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
    this._text += data;
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
    if (piece.next_offset !== this._start || piece.offset > this._start) {
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
    this._text = data + this._text;
    this._start = start;
    // The user asked for this text: leave it, and room for a window of new text.
    this._limit = this._text.length + this._window;
    return true;
  }

  private _trim(): void {
    const excess = this._text.length - this._limit;
    if (excess <= 0) {
      return;
    }
    // Cut at the first line end after the excess, so the window starts on a whole
    // line; a line longer than the window is cut where it must be.
    const newline = this._text.indexOf('\n', excess);
    let cut =
      newline >= 0 && newline < this._text.length - 1 ? newline + 1 : excess;
    // Never split a surrogate pair.
    if ((this._text.charCodeAt(cut) & 0xfc00) === 0xdc00) {
      cut++;
    }
    this._start += utf8ByteLength(this._text.slice(0, cut));
    this._text = this._text.slice(cut);
  }

  private _text = '';
  private _pending = '';
  private _start: number;
  private _end: number;
  private _limit: number;
  private readonly _window: number;
  private _alignFirstLine: boolean;
}
