/**
 * A running job's progress as its log tells it. The runner writes a `[job]` line as
 * each cell starts ("cell 4 started (3 of 10)") before any of that cell's output, and
 * the Jobs panel reads the log every half second, while the job's described progress
 * reaches the list later (the runner's status file, the service's look at it, the
 * list's refresh). The panel shows whichever is further on, so its cell count and
 * status never lag the log lines it shows.
 */
import { IDescribeJob } from '../common/models';

/**
 * The runner's `[job]` lines this reads (see jupyter_to_job/runner.py).
 */
const KERNEL_START = /^\[job\] starting kernel .*: (\d+) code cells? to run$/;
const CELL_START = /^\[job\] cell (\d+) started \((\d+) of (\d+)\)$/;

/**
 * How far the log says the job got.
 */
export interface ILogProgress {
  /**
   * The user's code cells to run; null until the log says.
   */
  cellsTotal: number | null;
  /**
   * The user's code cells started (the k of the newest "(k of n)"); 0 for none.
   */
  cellsStarted: number;
  /**
   * The notebook index of the cell the newest "started" line names; null before one.
   */
  currentCell: number | null;
}

/**
 * Reads a log's lines as they come (in pieces that may end mid-line) and keeps the
 * furthest progress they tell.
 */
export class LogProgressReader {
  /**
   * The progress read so far.
   */
  get progress(): ILogProgress {
    return this._progress;
  }

  /**
   * Read the next piece of the log, following the last one read.
   *
   * @returns Whether the progress moved on.
   */
  read(text: string): boolean {
    const lines = (this._partial + text).split('\n');
    this._partial = lines.pop() ?? '';
    let moved = false;
    for (const line of lines) {
      moved = this._readLine(line.replace(/\r$/, '')) || moved;
    }
    return moved;
  }

  private _readLine(line: string): boolean {
    if (!line.startsWith('[job] ')) {
      return false;
    }
    const cell = CELL_START.exec(line);
    if (cell) {
      const started = Number(cell[2]);
      if (started <= this._progress.cellsStarted) {
        return false; // an earlier attempt's line, or one read again
      }
      this._progress = {
        cellsTotal: Number(cell[3]),
        cellsStarted: started,
        currentCell: Number(cell[1])
      };
      return true;
    }
    const kernel = KERNEL_START.exec(line);
    if (kernel && this._progress.cellsTotal === null) {
      this._progress = { ...this._progress, cellsTotal: Number(kernel[1]) };
      return true;
    }
    return false;
  }

  private _partial = '';
  private _progress: ILogProgress = {
    cellsTotal: null,
    cellsStarted: 0,
    currentCell: null
  };
}

/**
 * The job as the panel shows it: its described progress, or the log's where the log
 * is further on. Only a running job (or one still described as queued whose log has
 * started its cells) takes the log's progress; a finished job is as described.
 */
export function withLogProgress(
  job: IDescribeJob,
  progress: ILogProgress | null
): IDescribeJob {
  if (
    progress === null ||
    !(job.status === 'RUNNING' || job.status === 'QUEUED') ||
    (progress.cellsStarted === 0 && progress.cellsTotal === null)
  ) {
    return job;
  }
  const total = job.cells_total ?? progress.cellsTotal;
  const doneByLog = Math.max(0, progress.cellsStarted - 1);
  const done = job.cells_completed ?? 0;
  const status = progress.cellsStarted > 0 ? 'RUNNING' : job.status;
  if (doneByLog > done || (doneByLog === done && job.current_cell === null)) {
    return {
      ...job,
      status,
      queue_position: status === 'RUNNING' ? null : job.queue_position,
      cells_total: total,
      cells_completed: doneByLog,
      current_cell: progress.currentCell
    };
  }
  return { ...job, status, cells_total: total };
}
