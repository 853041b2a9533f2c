import { fromFirstWholeLine, LogBuffer, utf8ByteLength } from '../logBuffer';

/** A piece of log `data` read at byte `offset`. */
function piece(offset: number, data: string) {
  return { offset, next_offset: offset + utf8ByteLength(data), data };
}

describe('utf8ByteLength', () => {
  it('counts bytes as UTF-8 encodes them', () => {
    expect(utf8ByteLength('')).toBe(0);
    expect(utf8ByteLength('[cell 1] ok\n')).toBe(12);
    expect(utf8ByteLength('é')).toBe(2);
    expect(utf8ByteLength('→')).toBe(3);
    expect(utf8ByteLength('🚀')).toBe(4);
    expect(utf8ByteLength('loss→0.1 🚀')).toBe(
      new TextEncoder().encode('loss→0.1 🚀').length
    );
  });
});

describe('fromFirstWholeLine', () => {
  it('drops the partial first line and counts its bytes', () => {
    expect(fromFirstWholeLine('ll 3] epoch 2\n[cell 3] epoch 3\n')).toEqual({
      text: '[cell 3] epoch 3\n',
      dropped: 14
    });
  });

  it('counts each stray byte of a cut character as one byte', () => {
    // A read that started inside "→" (3 bytes) gets 2 stray bytes, decoded as U+FFFD.
    expect(fromFirstWholeLine('\ufffd\ufffd x\nnext\n')).toEqual({
      text: 'next\n',
      dropped: 5
    });
  });

  it('keeps nothing until a line ends', () => {
    expect(fromFirstWholeLine('no line end yet')).toBeNull();
  });
});

describe('LogBuffer, the window of log the page holds', () => {
  it('appends pieces in order and knows where to read on', () => {
    const buffer = new LogBuffer(1000);
    expect(buffer.append(piece(0, '[job] starting\n'))).toBe(true);
    expect(buffer.append(piece(15, '[cell 1] hello\n'))).toBe(true);
    expect(buffer.text).toBe('[job] starting\n[cell 1] hello\n');
    expect(buffer.start).toBe(0);
    expect(buffer.end).toBe(30);
    expect(buffer.hasEarlier).toBe(false);
  });

  it('ignores a piece that does not continue the window', () => {
    const buffer = new LogBuffer(1000);
    buffer.append(piece(0, 'one\n'));
    // A repeated read of the same bytes, then one from the future
    expect(buffer.append(piece(0, 'one\n'))).toBe(false);
    expect(buffer.append(piece(10, 'three\n'))).toBe(false);
    expect(buffer.text).toBe('one\n');
    expect(buffer.end).toBe(4);
  });

  it('drops whole old lines when it grows past its limit', () => {
    const buffer = new LogBuffer(12);
    buffer.append(piece(0, 'line 1\nline 2\n'));
    buffer.append(piece(14, 'line 3\n'));
    // Then the window keeps the newest lines that fit, starting on a line
    expect(buffer.text).toBe('line 3\n');
    expect(buffer.start).toBe(14);
    expect(buffer.hasEarlier).toBe(true);
    expect(buffer.end).toBe(21);
  });

  it('counts dropped bytes, not characters, for the start offset', () => {
    const buffer = new LogBuffer(8);
    buffer.append(piece(0, 'é→🚀\nabc\n'));
    expect(buffer.text).toBe('abc\n');
    expect(buffer.start).toBe(utf8ByteLength('é→🚀\n'));
  });

  it('starting inside a long log, shows it from the first whole line', () => {
    // Given a window that starts at byte 5 of "[job] start\n[cell 1] a\n"
    const buffer = new LogBuffer(1000, 5);
    buffer.append(piece(5, ' start\n'.slice(0, 3)));
    // Then nothing shows while the partial line has not ended
    expect(buffer.text).toBe('');
    buffer.append(piece(8, 'art\n[cell 1] a\n'));
    expect(buffer.text).toBe('[cell 1] a\n');
    expect(buffer.start).toBe(12);
    expect(buffer.end).toBe(23);
  });

  it('puts earlier text back in front and keeps it while following', () => {
    const buffer = new LogBuffer(7);
    buffer.append(piece(0, 'line 1\nline 2\n'));
    expect(buffer.text).toBe('line 2\n');
    expect(buffer.prepend(piece(0, 'line 1\n'))).toBe(true);
    expect(buffer.text).toBe('line 1\nline 2\n');
    expect(buffer.start).toBe(0);
    // The user asked for the earlier text: the next line does not push it out
    buffer.append(piece(14, 'l3\n'));
    expect(buffer.text).toBe('line 1\nline 2\nl3\n');
  });

  it('refuses earlier text that does not end where the window starts', () => {
    const buffer = new LogBuffer(7);
    buffer.append(piece(0, 'line 1\nline 2\n'));
    expect(buffer.prepend(piece(0, 'line'))).toBe(false);
    expect(buffer.text).toBe('line 2\n');
  });

  it('refuses a window of no characters', () => {
    expect(() => new LogBuffer(0)).toThrow(RangeError);
  });
});

describe('LogBuffer, the line index a log view reads', () => {
  /** `count` lines "row 0" ... of a log, as text. */
  const rows = (from: number, count: number) =>
    Array.from({ length: count }, (_, i) => `row ${from + i}\n`).join('');

  it('finds every line of a long log read in pieces of any size', () => {
    // Given 20,000 lines read in pieces that cut lines anywhere
    const text = rows(0, 20000);
    const buffer = new LogBuffer(10 * 1024 * 1024);
    for (let at = 0; at < text.length; at += 777) {
      buffer.append(piece(at, text.slice(at, at + 777)));
    }

    // Then each line is where it was written, without its line end
    expect(buffer.lineCount).toBe(20000);
    expect(buffer.line(0)).toBe('row 0');
    expect(buffer.line(12345)).toBe('row 12345');
    expect(buffer.line(19999)).toBe('row 19999');
    expect(buffer.line(20000)).toBe('');
    expect(buffer.text).toBe(text);
    // And the pieces became a few blocks, not one per read
    expect(buffer.blocks().length).toBeLessThan(10);
  });

  it('counts the line being written as the last line until it ends', () => {
    const buffer = new LogBuffer(1000);
    buffer.append(piece(0, '[cell 1] epoch 1\n[cell 1] progress 10%'));
    expect(buffer.lineCount).toBe(2);
    expect(buffer.line(1)).toBe('[cell 1] progress 10%');
    buffer.append(piece(38, ' 20%\n'));
    expect(buffer.lineCount).toBe(2);
    expect(buffer.line(1)).toBe('[cell 1] progress 10% 20%');
    expect(buffer.line(2)).toBe('');
  });

  it('numbers lines from the new first line after earlier text is put back', () => {
    // Given the end of a log, then the part before it put back in front
    const early = rows(0, 1000);
    const late = rows(1000, 1000);
    const buffer = new LogBuffer(1024 * 1024, early.length - 3);
    buffer.append(piece(early.length - 3, early.slice(-3) + late));
    expect(buffer.line(0)).toBe('row 1000');
    const version = buffer.version;
    expect(buffer.prepend(piece(0, early))).toBe(true);

    // Then line numbers start at the log's first line, and the view learns that
    // 1,000 lines came in front of what it showed
    expect(buffer.lineCount).toBe(2000);
    expect(buffer.line(0)).toBe('row 0');
    expect(buffer.line(1500)).toBe('row 1500');
    expect(buffer.shift).toBe(1000);
    expect(buffer.version).toBeGreaterThan(version);
  });

  it('drops whole old lines while following past its limit, and says how many', () => {
    const buffer = new LogBuffer(100 * 1024);
    const text = rows(0, 30000);
    for (let at = 0; at < text.length; at += 4096) {
      buffer.append(piece(at, text.slice(at, at + 4096)));
    }
    // Then it holds the newest whole lines within the limit
    expect(buffer.length).toBeLessThanOrEqual(100 * 1024);
    expect(buffer.line(buffer.lineCount - 1)).toBe('row 29999');
    expect(buffer.line(0)).toMatch(/^row \d+$/);
    const first = Number(buffer.line(0).slice(4));
    expect(buffer.lineCount).toBe(30000 - first);
    expect(buffer.shift).toBe(-first);
    expect(buffer.start).toBe(utf8ByteLength(rows(0, first)));
  });

  it('keeps at most its most lines, however short they are', () => {
    // Given a buffer that keeps 100 lines, and 250 short lines read
    const buffer = new LogBuffer(1024 * 1024, 0, 100);
    buffer.append(piece(0, rows(0, 250)));
    // Then it holds the newest 100, and says 150 went from the front
    expect(buffer.lineCount).toBe(100);
    expect(buffer.line(0)).toBe('row 150');
    expect(buffer.line(99)).toBe('row 249');
    expect(buffer.shift).toBe(-150);
    expect(buffer.start).toBe(utf8ByteLength(rows(0, 150)));
  });
});
