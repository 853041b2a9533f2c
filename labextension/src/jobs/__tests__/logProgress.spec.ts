/**
 * A running job's progress read from its log, and the job as the panel shows it: as
 * far on as the log lines it shows, never behind them.
 */
import { jobProgress, statusLine } from '../jobStatus';
import { LogProgressReader, withLogProgress } from '../logProgress';
import { makeJob } from '../../__tests__/jobs.fixture';

/** The runner's log of a two-cell notebook with parameters, up to the second cell's output. */
const LOG_AT_SECOND_CELL = [
  '[job] starting',
  "[job] starting kernel 'python3': 2 code cells to run",
  '[job] setting parameters (cell 1, injected-parameters)',
  '[job] cell 2 started (1 of 2)',
  '[cell 2] loading run1',
  '[job] cell 3 started (2 of 2)',
  '[cell 3] step 1 of run1',
  ''
].join('\n');

describe('LogProgressReader', () => {
  it('reads the cells started from the runner’s lines, in pieces cut anywhere', () => {
    // Given the log read in pieces of 7 characters (lines cut in the middle)
    const reader = new LogProgressReader();
    for (let at = 0; at < LOG_AT_SECOND_CELL.length; at += 7) {
      reader.read(LOG_AT_SECOND_CELL.slice(at, at + 7));
    }

    // Then it knows the second of two cells started, and which notebook cell it is
    expect(reader.progress).toEqual({
      cellsTotal: 2,
      cellsStarted: 2,
      currentCell: 3
    });
  });

  it('knows the count of cells once the kernel starts, before any cell', () => {
    const reader = new LogProgressReader();
    expect(
      reader.read("[job] starting kernel 'python3': 4 code cells to run\n")
    ).toBe(true);
    expect(reader.progress).toEqual({
      cellsTotal: 4,
      cellsStarted: 0,
      currentCell: null
    });
  });

  it('is not fooled by a cell printing what looks like the runner’s line', () => {
    const reader = new LogProgressReader();
    reader.read('[cell 2] [job] cell 9 started (9 of 9)\n');
    expect(reader.progress.cellsStarted).toBe(0);
  });
});

describe('A running job as the Jobs panel shows it', () => {
  it('is at the second cell when the log shows its output, though described as just started', () => {
    // Given a job described as the issue saw it: running, 0 of 2 cells, no current cell
    const described = makeJob({
      status: 'RUNNING',
      cells_completed: 0,
      cells_total: 2,
      current_cell: null,
      parameters: { run: 'run1' }
    });
    expect(statusLine(described)).toBe(
      'Starting the kernel and setting parameters.'
    );
    // And a log that already shows the second cell's output
    const reader = new LogProgressReader();
    reader.read(LOG_AT_SECOND_CELL);

    // When the panel shows the job with its log
    const shown = withLogProgress(described, reader.progress);

    // Then it says the second cell runs, with one of two done
    expect(statusLine(shown)).toBe('Running cell 2 of 2.');
    expect(jobProgress(shown).text).toBe('1 of 2 cells');
  });

  it('takes the described progress when it is further on than the log read so far', () => {
    const described = makeJob({
      status: 'RUNNING',
      cells_completed: 2,
      cells_total: 4,
      current_cell: 5
    });
    const reader = new LogProgressReader();
    reader.read('[job] cell 2 started (1 of 4)\n');
    expect(withLogProgress(described, reader.progress)).toEqual(described);
  });

  it('is running once its log has started a cell, though still described as queued', () => {
    const described = makeJob({
      status: 'QUEUED',
      queue_position: 1,
      cells_completed: 0,
      cells_total: null,
      current_cell: null
    });
    const reader = new LogProgressReader();
    reader.read('[job] cell 0 started (1 of 3)\n');
    const shown = withLogProgress(described, reader.progress);
    expect(shown.status).toBe('RUNNING');
    expect(statusLine(shown)).toBe('Running cell 1 of 3.');
  });

  it('is as described once it has ended', () => {
    const described = makeJob({
      status: 'FAILED',
      cells_completed: 0,
      cells_total: 2
    });
    const reader = new LogProgressReader();
    reader.read(LOG_AT_SECOND_CELL);
    expect(withLogProgress(described, reader.progress)).toEqual(described);
  });
});
