import {
  canDelete,
  canStop,
  isFinal,
  jobProgress,
  queueText,
  statusLabel,
  statusLine,
  actionsShown,
  showsOwners
} from '../jobStatus';
import { JOB_STATUSES } from '../../common/models';
import { makeJob } from '../../__tests__/jobs.fixture';

describe('what a job status allows', () => {
  it('treats COMPLETED, FAILED and STOPPED as final, and nothing else', () => {
    const final = JOB_STATUSES.filter(isFinal);
    expect(final).toEqual(['COMPLETED', 'FAILED', 'STOPPED']);
  });

  it('offers Stop only before the job starts or while it runs', () => {
    // A STOPPING job is already on its way out: a second Stop would do nothing.
    expect(JOB_STATUSES.filter(canStop)).toEqual([
      'CREATED',
      'QUEUED',
      'RUNNING'
    ]);
  });

  it('offers Delete only for finished jobs', () => {
    expect(JOB_STATUSES.filter(canDelete)).toEqual([
      'COMPLETED',
      'FAILED',
      'STOPPED'
    ]);
  });

  it('labels every status with a capitalised word', () => {
    expect(JOB_STATUSES.map(statusLabel)).toEqual([
      'Created',
      'Queued',
      'Running',
      'Stopping',
      'Completed',
      'Failed',
      'Stopped'
    ]);
  });
});

describe('jobProgress, the cells done of the total', () => {
  it('gives the fraction and "3 of 10 cells" for a running job', () => {
    expect(jobProgress({ cells_completed: 3, cells_total: 10 })).toEqual({
      done: 3,
      total: 10,
      fraction: 0.3,
      text: '3 of 10 cells'
    });
  });

  it('has no fraction while the runner has not counted the cells', () => {
    // Given a job whose notebook the runner has not read yet
    const progress = jobProgress({ cells_completed: 0, cells_total: null });
    // Then the bar cannot say how far it is, and there is nothing to read
    expect(progress.fraction).toBeNull();
    expect(progress.text).toBe('');
    expect(jobProgress({ cells_completed: 1, cells_total: null }).text).toBe(
      '1 cell done'
    );
  });

  it('never shows more than the total, nor more than a full bar', () => {
    const progress = jobProgress({ cells_completed: 12, cells_total: 10 });
    expect(progress.fraction).toBe(1);
    expect(progress.text).toBe('10 of 10 cells');
  });

  it('reads a notebook without code cells as done', () => {
    expect(jobProgress({ cells_completed: 0, cells_total: 0 })).toEqual({
      done: 0,
      total: 0,
      fraction: 1,
      text: 'no code cells'
    });
  });

  it('says "1 of 1 cell" in the singular', () => {
    expect(jobProgress({ cells_completed: 1, cells_total: 1 }).text).toBe(
      '1 of 1 cell'
    );
  });
});

describe('queueText, where a queued job stands', () => {
  it('says the first job in the queue is next', () => {
    expect(queueText(1)).toBe('next in queue');
  });

  it('counts the jobs ahead of the others', () => {
    expect(queueText(2)).toBe('1 job ahead');
    expect(queueText(5)).toBe('4 jobs ahead');
  });

  it('still says something when the position is unknown', () => {
    expect(queueText(null)).toBe('waiting in queue');
    expect(queueText(0)).toBe('waiting in queue');
  });
});

describe('statusLine, one line about where the job is', () => {
  it('counts the running cell from 1 among the user’s code cells, as the log does', () => {
    // The runner's log says "cell 0 started (1 of 2)" for the first code cell
    const first = makeJob({
      status: 'RUNNING',
      cells_completed: 0,
      cells_total: 2,
      current_cell: 0,
      parameters: {}
    });
    expect(statusLine(first)).toBe('Running cell 1 of 2.');
    const fourth = makeJob({
      status: 'RUNNING',
      cells_completed: 3,
      cells_total: 10,
      current_cell: 5
    });
    expect(statusLine(fourth)).toBe('Running cell 4 of 10.');
  });

  it('names the parameters cell for what it is, not as one of the user’s cells', () => {
    // papermill's injected-parameters cell: the runner reports no cell of the user's
    const starting = makeJob({
      status: 'RUNNING',
      cells_completed: 0,
      cells_total: 2,
      current_cell: null,
      parameters: { lr: 0.1 }
    });
    expect(statusLine(starting)).toBe(
      'Starting the kernel and setting parameters.'
    );
    const afterSetup = { ...starting, cells_completed: 1 };
    expect(statusLine(afterSetup)).toBe('Setting parameters.');
    expect(statusLine({ ...starting, parameters: {} })).toBe(
      'Starting the kernel.'
    );
  });

  it('gives the queue position and the server’s reason for a queued job', () => {
    const job = makeJob({
      status: 'QUEUED',
      queue_position: 2,
      status_message: 'Waiting for a free RTX 4090 share.'
    });
    expect(statusLine(job)).toBe(
      'Queued: 1 job ahead. Waiting for a free RTX 4090 share.'
    );
  });

  it('uses the server’s sentence for a finished job, else the status', () => {
    expect(
      statusLine(
        makeJob({ status: 'FAILED', status_message: 'Cell 3 raised KeyError.' })
      )
    ).toBe('Cell 3 raised KeyError.');
    expect(statusLine(makeJob({ status: 'COMPLETED' }))).toBe('Completed.');
  });
});

describe('actionsShown: only the actions the viewer may take', () => {
  const features = { stop: true, delete: true };

  it('gives the owner Stop while it runs, Delete once finished, and Rerun', () => {
    expect(actionsShown(makeJob({ status: 'RUNNING' }), features)).toEqual({
      stop: true,
      delete: false,
      rerun: true
    });
    expect(actionsShown(makeJob({ status: 'COMPLETED' }), features)).toEqual({
      stop: false,
      delete: true,
      rerun: true
    });
  });

  it('gives an instructor reading a student’s job no action at all', () => {
    const students = {
      own: false,
      can_stop: false,
      can_delete: false,
      can_rerun: false
    };
    for (const status of ['RUNNING', 'COMPLETED', 'FAILED'] as const) {
      expect(actionsShown(makeJob({ status, ...students }), features)).toEqual({
        stop: false,
        delete: false,
        rerun: false
      });
    }
  });

  it('gives an admin Stop and Delete of another’s job, never Rerun', () => {
    const admins = {
      own: false,
      can_stop: true,
      can_delete: true,
      can_rerun: false
    };
    expect(
      actionsShown(makeJob({ status: 'QUEUED', ...admins }), features)
    ).toEqual({
      stop: true,
      delete: false,
      rerun: false
    });
  });

  it('hides what the back end does not support', () => {
    expect(
      actionsShown(makeJob({ status: 'RUNNING' }), {
        stop: false,
        delete: false
      })
    ).toEqual({ stop: false, delete: false, rerun: true });
  });
});

describe('showsOwners: the Owner column', () => {
  it('is shown only when the list holds a job that is not the viewer’s', () => {
    expect(showsOwners([makeJob(), makeJob({ job_id: 'x' })])).toBe(false);
    expect(showsOwners([makeJob(), makeJob({ job_id: 'x', own: false })])).toBe(
      true
    );
    expect(showsOwners([])).toBe(false);
  });
});
