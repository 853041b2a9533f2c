import { LogBuffer, utf8ByteLength } from '../logBuffer';
import { ERROR_LINE, findLines, firstMatchingLine } from '../logSearch';

/** A buffer holding `text`, read in pieces of `pieceSize` characters. */
function bufferOf(text: string, pieceSize = 1000): LogBuffer {
  const buffer = new LogBuffer(64 * 1024 * 1024);
  let offset = 0;
  for (let at = 0; at < text.length; at += pieceSize) {
    const data = text.slice(at, at + pieceSize);
    const next = offset + utf8ByteLength(data);
    buffer.append({ offset, next_offset: next, data });
    offset = next;
  }
  return buffer;
}

const ROWS = Array.from(
  { length: 200000 },
  (_, i) => `[cell 1] row ${String(i).padStart(6, '0')} of the log\n`
).join('');

describe('findLines, search within the log', () => {
  it('finds the one line of a 200,000-line log that holds the text', () => {
    const buffer = bufferOf(ROWS, 256 * 1024);
    expect(findLines(buffer, 'row 123456')).toEqual([123456]);
  });

  it('lists each matching line once, in order, ignoring case', () => {
    // Given a log where "row 1000" starts 100 lines and "LOG" ends every line
    const buffer = bufferOf(ROWS, 256 * 1024);
    const found = findLines(buffer, 'row 1000');
    expect(found.length).toBe(100);
    expect(found[0]).toBe(100000);
    expect(found[99]).toBe(100099);
    expect(findLines(buffer, 'OF THE LOG').length).toBe(200000);
    expect(findLines(buffer, 'OF THE LOG', { matchCase: true })).toEqual([]);
  });

  it('searches only the lines from a given line on (new lines while following)', () => {
    const buffer = bufferOf('a x\nb\nc x\nd x');
    expect(findLines(buffer, 'x')).toEqual([0, 2, 3]);
    expect(findLines(buffer, 'x', { fromLine: 1 })).toEqual([2, 3]);
    expect(findLines(buffer, 'x', { fromLine: 3 })).toEqual([3]);
  });

  it('finds nothing for an empty search or text across a line end', () => {
    const buffer = bufferOf('one\ntwo\n');
    expect(findLines(buffer, '')).toEqual([]);
    expect(findLines(buffer, 'one\ntwo')).toEqual([]);
    expect(findLines(buffer, 'three')).toEqual([]);
  });

  it('keeps line numbers right where lower case changes a text’s length', () => {
    // "İ" lower-cases to two characters: the block is searched line by line
    const buffer = bufferOf('İstanbul\nplain\nİzmir plain\n');
    expect(findLines(buffer, 'plain')).toEqual([1, 2]);
  });
});

describe('firstMatchingLine, jump to the first error', () => {
  it('finds the first traceback of a job’s log, not the later ones', () => {
    const log = [
      '[job] starting kernel python3: 2 code cells to run',
      '[cell 1] row 1',
      '[cell 1] Traceback (most recent call last):',
      '[cell 1]   File "<stdin>", line 1, in <module>',
      '[cell 1] ZeroDivisionError: division by zero',
      '[cell 2] ValueError                                Traceback (most recent call last)',
      '[job] failed: The job failed in cell 2: ValueError: bad'
    ].join('\n');
    expect(firstMatchingLine(bufferOf(log + '\n', 50))).toBe(2);
  });

  it('knows each line the runner writes when a job fails', () => {
    const matches = (line: string) => ERROR_LINE.test(line);
    expect(
      matches('[cell 3] ValueError: the learning rate must be positive')
    ).toBe(true);
    expect(
      matches('[cell 3] torch.cuda.OutOfMemoryError: CUDA out of memory')
    ).toBe(true);
    expect(matches('[cell 4] Error: the data folder is empty')).toBe(true);
    expect(matches('[cell 4] ERROR:root:could not read batch 3')).toBe(true);
    expect(matches('[cell 2] KeyboardInterrupt')).toBe(false);
    expect(matches('[cell 1] Error rate 0.02, Errors seen 3')).toBe(false);
    expect(matches('[job] failed: The kernel died while running cell 2')).toBe(
      true
    );
    expect(matches('[cell 1] no errors so far, loss 0.12')).toBe(false);
    expect(matches('[cell 1] row 150000 of the log')).toBe(false);
    expect(matches('[job] final status: {"status": "COMPLETED"}')).toBe(false);
  });

  it('finds an error in the line being written and says null when there is none', () => {
    expect(firstMatchingLine(bufferOf('[cell 1] fine\n[job] failed: x'))).toBe(
      1
    );
    expect(firstMatchingLine(bufferOf(ROWS.slice(0, 100000)))).toBeNull();
  });
});
