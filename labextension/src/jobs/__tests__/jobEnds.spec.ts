import {
  JobEnd,
  JobEndTracker,
  JobEndWatcher,
  jobEndMessage,
  notifyJobEnd
} from '../jobEnds';
import { IDescribeJob } from '../../common/models';
import { makeJob } from '../../__tests__/jobs.fixture';

const OPENED = new Date('2024-05-06T10:00:00.000Z');
const INTERVAL = 20;
const sleep = (ms: number) => new Promise(resolve => setTimeout(resolve, ms));

const running = (id: string, more: Partial<IDescribeJob> = {}) =>
  makeJob({ job_id: id, status: 'RUNNING', end_time: null, ...more });
const ended = (
  id: string,
  status: 'COMPLETED' | 'FAILED' | 'STOPPED',
  more: Partial<IDescribeJob> = {}
) =>
  makeJob({
    job_id: id,
    status,
    end_time: '2024-05-06T10:13:00.000Z',
    ...more
  });

describe('JobEndTracker: which of the user’s jobs just ended', () => {
  it('announces nothing for jobs already finished when the lab opened', () => {
    const tracker = new JobEndTracker(OPENED);
    const before = ended('old', 'COMPLETED', {
      end_time: '2024-05-06T09:00:00.000Z'
    });
    expect(tracker.observe([before, running('r')])).toEqual([]);
    expect(tracker.observe([before, running('r')])).toEqual([]);
  });

  it('announces a job once when it goes from running to completed or failed', () => {
    const tracker = new JobEndTracker(OPENED);
    tracker.observe([running('a'), running('b')]);
    expect(tracker.watching).toBe(true);

    const now = [ended('a', 'COMPLETED'), ended('b', 'FAILED')];
    expect(tracker.observe(now).map(job => job.job_id)).toEqual(['a', 'b']);
    // The next listing still holds them, finished: not announced again
    expect(tracker.observe(now)).toEqual([]);
    expect(tracker.watching).toBe(false);
  });

  it('announces a job that started and ended between two listings', () => {
    const tracker = new JobEndTracker(OPENED);
    tracker.observe([]);
    const quick = ended('quick', 'COMPLETED');
    expect(tracker.observe([quick])).toEqual([quick]);
  });

  it('leaves out stopped jobs and jobs that are not the viewer’s own', () => {
    // Given an instructor whose list holds a student's running job and their own
    const tracker = new JobEndTracker(OPENED);
    tracker.observe([
      running('student', { own: false, owner: 'bob' }),
      running('mine')
    ]);
    // When both end, the student's completed and the instructor's stopped
    const announced = tracker.observe([
      ended('student', 'COMPLETED', { own: false, owner: 'bob' }),
      ended('mine', 'STOPPED')
    ]);
    // Then neither is announced
    expect(announced).toEqual([]);
  });
});

describe('jobEndMessage', () => {
  it('says how long a completed job ran', () => {
    expect(jobEndMessage(ended('a', 'COMPLETED', { name: 'train' }))).toBe(
      'Job “train” completed in 12 min.'
    );
  });

  it('says why a job failed, short enough for a notification', () => {
    const message = jobEndMessage(
      ended('a', 'FAILED', {
        name: 'train',
        status_message: `Cell 3 raised ValueError: ${'x'.repeat(200)}`
      })
    );
    expect(
      message.startsWith('Job “train” failed. Cell 3 raised ValueError')
    ).toBe(true);
    expect(message.length).toBeLessThanOrEqual(140);
  });
});

describe('JobEndWatcher: a notification for each job of the user’s that ends', () => {
  let watcher: JobEndWatcher | null = null;
  afterEach(() => {
    watcher?.dispose();
    watcher = null;
  });

  it('lists in the background and notifies a job that ends while the lab is open', async () => {
    // Given a lab opened with one running job and one finished before
    let jobs: IDescribeJob[] = [
      running('r', { name: 'train' }),
      ended('old', 'FAILED', { end_time: '2024-05-06T09:00:00.000Z' })
    ];
    const api = {
      listRecentJobs: async () => ({
        jobs,
        next_token: null,
        total_count: jobs.length
      })
    };
    const shown: [string, JobEnd][] = [];
    watcher = new JobEndWatcher({
      api,
      notify: (job, end) => shown.push([job.name, end]),
      interval: INTERVAL,
      idleInterval: 60000,
      openedAt: OPENED
    });
    await sleep(INTERVAL * 4);
    expect(shown).toEqual([]);

    // When the running job completes
    jobs = [ended('r', 'COMPLETED', { name: 'train' }), jobs[1]];
    await sleep(INTERVAL * 6);

    // Then one success notification names it; the old failure is never shown
    expect(shown).toEqual([['train', 'success']]);
  });
});

describe('notifyJobEnd, the notification itself', () => {
  it('is a success with "Show job" for a completed job, an error that stays for a failed one', () => {
    const calls: { kind: string; message: string; options: any }[] = [];
    const notification = {
      success: (message: string, options: any) => {
        calls.push({ kind: 'success', message, options });
        return 'n1';
      },
      error: (message: string, options: any) => {
        calls.push({ kind: 'error', message, options });
        return 'n2';
      }
    };
    const shown: string[] = [];
    notifyJobEnd(
      ended('a', 'COMPLETED', { name: 'train' }),
      'success',
      id => shown.push(id),
      notification as any
    );
    notifyJobEnd(
      ended('b', 'FAILED', {
        name: 'eval',
        status_message: 'Cell 2 raised KeyError.'
      }),
      'error',
      id => shown.push(id),
      notification as any
    );
    expect(calls.map(call => [call.kind, call.message])).toEqual([
      ['success', 'Job “train” completed in 12 min.'],
      ['error', 'Job “eval” failed. Cell 2 raised KeyError.']
    ]);
    expect(calls[1].options.autoClose).toBe(false);
    // When "Show job" is clicked, the Jobs panel opens at that job
    calls[1].options.actions[0].callback(new MouseEvent('click'));
    expect(calls[1].options.actions[0].label).toBe('Show job');
    expect(shown).toEqual(['b']);
  });
});
