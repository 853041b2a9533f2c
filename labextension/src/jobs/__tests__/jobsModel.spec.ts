import { JobsAPI } from '../../common/api';
import { JobAPIError } from '../../common/errors';
import { JobsModel } from '../jobsModel';
import { IDescribeJob, IJobLogChunk } from '../../common/models';
import { makeJob } from '../../__tests__/jobs.fixture';

const INTERVAL = 20;
const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

/**
 * A job API whose jobs and log the test changes as the "server" moves on.
 */
class FakeJobsAPI {
  jobs: IDescribeJob[] = [];
  log = '';
  listCalls = 0;
  logReads: number[] = [];
  failWith: Error | null = null;

  async listRecentJobs() {
    this.listCalls++;
    if (this.failWith) {
      throw this.failWith;
    }
    return { jobs: this.jobs, next_token: null, total_count: this.jobs.length };
  }

  async getLog(
    jobId: string,
    offset: number,
    limit: number
  ): Promise<IJobLogChunk> {
    this.logReads.push(offset);
    const data = this.log.slice(offset, offset + limit);
    const job = this.jobs.find(item => item.job_id === jobId);
    const final = job
      ? ['COMPLETED', 'FAILED', 'STOPPED'].includes(job.status)
      : true;
    return {
      job_id: jobId,
      offset,
      next_offset: offset + data.length,
      size: this.log.length,
      data,
      complete: final && offset + data.length >= this.log.length
    };
  }

  async stopJob(jobId: string) {
    this.jobs = this.jobs.map(job =>
      job.job_id === jobId ? { ...job, status: 'STOPPED' as const } : job
    );
  }

  async deleteJob(jobId: string) {
    this.jobs = this.jobs.filter(job => job.job_id !== jobId);
  }
}

function modelOn(api: FakeJobsAPI): JobsModel {
  return new JobsModel({
    api: api as unknown as JobsAPI,
    refreshInterval: INTERVAL
  });
}

/**
 * A shown panel at job `jobId` that lists the jobs every 50 intervals and reads the
 * job's log every interval.
 */
async function showingLog(api: FakeJobsAPI, jobId: string): Promise<JobsModel> {
  const model = new JobsModel({
    api: api as unknown as JobsAPI,
    refreshInterval: INTERVAL * 50,
    logInterval: INTERVAL
  });
  model.visible = true;
  await model.refresh();
  model.select(jobId);
  return model;
}

describe('JobsModel, the Jobs panel’s state and polling', () => {
  let model: JobsModel | null = null;
  afterEach(() => {
    model?.dispose();
    model = null;
  });

  it('does not poll while the panel is hidden', async () => {
    const api = new FakeJobsAPI();
    api.jobs = [makeJob({ status: 'RUNNING' })];
    model = modelOn(api);
    await sleep(INTERVAL * 5);
    expect(api.listCalls).toBe(0);
  });

  it('refreshes while a job runs, and stops once every job is final', async () => {
    // Given a shown panel with a running job
    const api = new FakeJobsAPI();
    api.jobs = [makeJob({ job_id: 'j', status: 'RUNNING', end_time: null })];
    model = modelOn(api);
    model.visible = true;
    await sleep(INTERVAL * 6);
    const whileRunning = api.listCalls;
    expect(whileRunning).toBeGreaterThan(2);

    // When the job completes
    api.jobs = [makeJob({ job_id: 'j', status: 'COMPLETED' })];
    await sleep(INTERVAL * 4);
    const afterFinal = api.listCalls;
    await sleep(INTERVAL * 6);

    // Then the panel shows it, and stops asking
    expect(model.jobs[0].status).toBe('COMPLETED');
    expect(api.listCalls).toBe(afterFinal);
  });

  it('stops polling when hidden and when disposed', async () => {
    const api = new FakeJobsAPI();
    api.jobs = [makeJob({ status: 'QUEUED' })];
    model = modelOn(api);
    model.visible = true;
    await sleep(INTERVAL * 4);
    model.visible = false;
    await sleep(INTERVAL * 2);
    const hidden = api.listCalls;
    await sleep(INTERVAL * 5);
    expect(api.listCalls).toBe(hidden);

    model.visible = true;
    await sleep(INTERVAL * 3);
    model.dispose();
    const disposed = api.listCalls;
    await sleep(INTERVAL * 5);
    expect(api.listCalls).toBe(disposed);
  });

  it('follows the selected job’s log and keeps it after the job ends', async () => {
    const api = new FakeJobsAPI();
    api.jobs = [makeJob({ job_id: 'j', status: 'RUNNING', log_size: 0 })];
    api.log = '[job] starting kernel\n';
    model = modelOn(api);
    model.visible = true;
    await model.refresh();
    model.select('j');
    await sleep(INTERVAL * 3);
    expect(model.log?.buffer.text).toBe('[job] starting kernel\n');

    api.log += '[cell 1] hello\n';
    api.jobs = [makeJob({ job_id: 'j', status: 'COMPLETED' })];
    await sleep(INTERVAL * 6);
    expect(model.log?.buffer.text).toBe(
      '[job] starting kernel\n[cell 1] hello\n'
    );
    expect(model.log?.complete).toBe(true);
    expect(model.selected?.status).toBe('COMPLETED');
  });

  it('reads a running job’s log more often than it lists the jobs', async () => {
    // Given a shown panel that lists jobs every second and reads the log every 20 ms
    const api = new FakeJobsAPI();
    api.jobs = [makeJob({ job_id: 'j', status: 'RUNNING', log_size: 0 })];
    model = await showingLog(api, 'j');

    // When the job writes a line after the list was last read
    await sleep(INTERVAL * 2);
    const lists = api.listCalls;
    api.log = '[cell 1] epoch 1\n';
    await sleep(INTERVAL * 4);

    // Then the log shows it before the list is read again
    expect(model.log?.buffer.text).toBe('[cell 1] epoch 1\n');
    expect(api.listCalls).toBe(lists);
  });

  it('shows a running job’s cell count as far on as the log it has read, before the list says so', async () => {
    // Given a shown panel that lists jobs every second and reads the log every 20 ms,
    // at a job described as just started
    const api = new FakeJobsAPI();
    api.jobs = [
      makeJob({
        job_id: 'j',
        status: 'RUNNING',
        log_size: 0,
        cells_completed: 0,
        cells_total: 2,
        current_cell: null,
        parameters: { run: 'run1' }
      })
    ];
    model = await showingLog(api, 'j');
    await sleep(INTERVAL * 2);
    const lists = api.listCalls;

    // When the job's log reaches its second cell's output before the list is read again
    api.log = [
      "[job] starting kernel 'python3': 2 code cells to run",
      '[job] setting parameters (cell 1, injected-parameters)',
      '[job] cell 2 started (1 of 2)',
      '[job] cell 3 started (2 of 2)',
      '[cell 3] step 1',
      ''
    ].join('\n');
    await sleep(INTERVAL * 4);
    expect(api.listCalls).toBe(lists);

    // Then the detail and the row both say the second of two cells runs, one done
    expect(model.selected?.current_cell).toBe(3);
    expect(model.selected?.cells_completed).toBe(1);
    expect(model.visibleJobs[0].cells_completed).toBe(1);
    expect(model.jobs[0].current_cell).toBe(3);
  });

  it('shows the end of a finished long log first, then reads the rest before it', async () => {
    // Given a finished job whose log is 3 MiB, 60,000 lines
    const api = new FakeJobsAPI();
    api.log = Array.from(
      { length: 60000 },
      (_, i) => `[cell 1] row ${String(i).padStart(5, '0')} ${'.'.repeat(34)}\n`
    ).join('');
    api.jobs = [
      makeJob({ job_id: 'j', status: 'COMPLETED', log_size: api.log.length })
    ];
    model = modelOn(api);
    await model.refresh();
    const shown: number[] = [];
    model.stateChanged.connect(() => shown.push(model!.log!.buffer.lineCount));

    // When it is selected
    model.select('j');
    await sleep(INTERVAL * 5);

    // Then the first read was of the log's end, and the whole log is held at last,
    // in order, having grown a piece at a time
    expect(api.logReads[0]).toBe(api.log.length - 256 * 1024);
    const buffer = model.log!.buffer;
    expect(buffer.hasEarlier).toBe(false);
    expect(buffer.lineCount).toBe(60000);
    expect(buffer.line(0)).toMatch(/^\[cell 1\] row 00000 /);
    expect(buffer.line(59999)).toMatch(/^\[cell 1\] row 59999 /);
    expect(new Set(shown).size).toBeGreaterThan(3);
    expect(model.log!.complete).toBe(true);
  });

  it('shows the sentence instead of a list when the extension is missing', async () => {
    const api = new FakeJobsAPI();
    api.failWith = new JobAPIError(
      new Response(null, { status: 404, statusText: 'Not Found' }),
      '<html>404</html>'
    );
    model = modelOn(api);
    await model.refresh();
    expect(model.loaded).toBe(true);
    expect(model.jobs).toEqual([]);
    expect(model.message).toMatch(
      /^Run as Job is not available on this server/
    );
  });

  it('filters and sorts what it lists', async () => {
    const api = new FakeJobsAPI();
    api.jobs = [
      makeJob({ job_id: 'a', name: 'b-train', status: 'FAILED' }),
      makeJob({ job_id: 'b', name: 'a-eval', status: 'COMPLETED' })
    ];
    model = modelOn(api);
    await model.refresh();
    model.setSort({ by: 'name', order: 'asc' });
    expect(model.visibleJobs.map(job => job.job_id)).toEqual(['b', 'a']);
    model.setFilter({ status: 'FAILED' });
    expect(model.visibleJobs.map(job => job.job_id)).toEqual(['a']);
  });

  it('stops and deletes through the API and updates the list', async () => {
    const api = new FakeJobsAPI();
    api.jobs = [makeJob({ job_id: 'j', status: 'RUNNING' })];
    model = modelOn(api);
    await model.refresh();
    model.select('j');
    await model.stop(model.jobs[0]);
    expect(model.selected?.status).toBe('STOPPED');
    await model.remove(model.jobs[0]);
    expect(model.jobs).toEqual([]);
    expect(model.selected).toBeNull();
    expect(model.actionError).toBeNull();
  });

  it('shows the server’s sentence when an action fails', async () => {
    const api = new FakeJobsAPI();
    api.jobs = [makeJob({ job_id: 'j', status: 'RUNNING' })];
    api.deleteJob = async () => {
      throw new JobAPIError(new Response(null, { status: 409 }), {
        message: 'The job is still running; stop it first, then delete it.',
        reason: 'not-finished'
      });
    };
    model = modelOn(api);
    await model.refresh();
    await model.remove(model.jobs[0]);
    expect(model.actionError).toBe(
      'The job is still running; stop it first, then delete it.'
    );
    expect(model.busyAction).toBeNull();
  });
});
