/**
 * Finding lines in a job's log: the lines that hold a search text, and the first
 * line that looks like an error. Both read the log a block at a time (see
 * `LogBuffer.blocks`), never line by line, so a 200,000-line log is searched in a
 * few milliseconds.
 */
import { lastAtMost, LogBuffer } from './logBuffer';

/**
 * The first line of an error as the job runner writes it: a Python traceback
 * (plain, or IPython's "ValueError   Traceback (most recent call last)"), an
 * exception line ("ValueError: ...", "Error: ..."), a `logging` error
 * ("ERROR:root:..."), or the runner's own "[job] failed: ..." line; in a multi-node
 * job's log, after the `[rank N] ` of the node that wrote it.
 */
export const ERROR_LINE =
  /Traceback \(most recent call last\)|^(?:\[rank \d+\] )?(?:\[cell \d+\] )?(?:(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*)?(?:Error|Exception)(?::|$)|^(?:\[rank \d+\] )?(?:\[cell \d+\] )?ERROR\b|^(?:\[rank \d+\] )?\[job\] failed:/m;

/**
 * The lines (0-based, in order) of `buffer` from `fromLine` on that hold `query`,
 * ignoring case unless `matchCase`. An empty query matches no line.
 */
export function findLines(
  buffer: LogBuffer,
  query: string,
  options: { matchCase?: boolean; fromLine?: number } = {}
): number[] {
  const found: number[] = [];
  if (!query || query.includes('\n')) {
    return found;
  }
  const fromLine = options.fromLine ?? 0;
  const needle = options.matchCase ? query : query.toLowerCase();
  for (const block of buffer.blocks()) {
    const lines = block.starts.length;
    if (block.firstLine + lines <= fromLine) {
      continue;
    }
    let haystack = options.matchCase ? block.text : block.text.toLowerCase();
    if (haystack.length !== block.text.length) {
      // Lower case changed the length (a few letters outside ASCII do): positions
      // no longer match the line starts, so search this block line by line.
      haystack = '';
    }
    const first = Math.max(0, fromLine - block.firstLine);
    if (!haystack) {
      for (let i = first; i < lines; i++) {
        const line = buffer.line(block.firstLine + i);
        const text = options.matchCase ? line : line.toLowerCase();
        if (text.includes(needle)) {
          found.push(block.firstLine + i);
        }
      }
      continue;
    }
    let at = haystack.indexOf(needle, block.starts[first]);
    while (at >= 0) {
      const i = lastAtMost(block.starts, at);
      found.push(block.firstLine + i);
      if (i + 1 >= lines) {
        break;
      }
      // One match per line: go on from the next line.
      at = haystack.indexOf(needle, block.starts[i + 1]);
    }
  }
  return found;
}

/**
 * The first line (0-based) of `buffer` that matches `pattern` (default: the first
 * line of an error), or null when none does. `pattern` is used with the `m` flag so
 * that `^` and `$` are a line's start and end.
 */
export function firstMatchingLine(
  buffer: LogBuffer,
  pattern: RegExp = ERROR_LINE
): number | null {
  const flags = pattern.flags.replace(/[gy]/g, '');
  const multiline = new RegExp(
    pattern.source,
    flags.includes('m') ? flags : flags + 'm'
  );
  for (const block of buffer.blocks()) {
    const match = multiline.exec(block.text);
    if (match) {
      return block.firstLine + lastAtMost(block.starts, match.index);
    }
  }
  return null;
}
