import {
  DEFAULT_SORT,
  filterJobs,
  hasUnfinishedJobs,
  NO_FILTER,
  sortJobs,
  upsertJob
} from '../jobList';
import { listedJobs, makeJob } from '../../__tests__/jobs.fixture';

const [train, sweep, eval2, queued] = listedJobs([
  ['a-1', 'Train ResNet', '2024-05-06T10:00:00.000Z', { status: 'RUNNING' }],
  ['b-2', 'lr sweep 10', '2024-05-06T09:00:00.000Z', { status: 'COMPLETED' }],
  ['c-3', 'eval 2', '2024-05-06T11:00:00.000Z', { status: 'FAILED' }],
  ['d-4', 'lr sweep 9', '2024-05-06T08:00:00.000Z', { status: 'QUEUED' }]
]);
const jobs = [train, sweep, eval2, queued];
const ids = (list: { job_id: string }[]) => list.map(job => job.job_id);

describe('filterJobs', () => {
  it('keeps every job without a filter', () => {
    expect(ids(filterJobs(jobs, NO_FILTER))).toEqual([
      'a-1',
      'b-2',
      'c-3',
      'd-4'
    ]);
  });

  it('keeps the jobs of one status', () => {
    expect(ids(filterJobs(jobs, { status: 'FAILED', name: '' }))).toEqual([
      'c-3'
    ]);
  });

  it('keeps the unfinished jobs for "Unfinished"', () => {
    expect(ids(filterJobs(jobs, { status: 'ACTIVE', name: '' }))).toEqual([
      'a-1',
      'd-4'
    ]);
  });

  it('matches a part of the name, ignoring case and spaces around it', () => {
    expect(ids(filterJobs(jobs, { status: 'ALL', name: '  SWEEP ' }))).toEqual([
      'b-2',
      'd-4'
    ]);
  });

  it('combines the status and the name', () => {
    expect(
      ids(filterJobs(jobs, { status: 'COMPLETED', name: 'sweep' }))
    ).toEqual(['b-2']);
  });
});

describe('sortJobs', () => {
  it('lists the newest first by default', () => {
    expect(ids(sortJobs(jobs, DEFAULT_SORT))).toEqual([
      'c-3',
      'a-1',
      'b-2',
      'd-4'
    ]);
  });

  it('lists the oldest first when asked', () => {
    expect(ids(sortJobs(jobs, { by: 'create_time', order: 'asc' }))).toEqual([
      'd-4',
      'b-2',
      'a-1',
      'c-3'
    ]);
  });

  it('sorts names as people read them: case-blind, numbers by value', () => {
    expect(
      sortJobs(jobs, { by: 'name', order: 'asc' }).map(job => job.name)
    ).toEqual(['eval 2', 'lr sweep 9', 'lr sweep 10', 'Train ResNet']);
    expect(
      sortJobs(jobs, { by: 'name', order: 'desc' }).map(job => job.name)
    ).toEqual(['Train ResNet', 'lr sweep 10', 'lr sweep 9', 'eval 2']);
  });

  it('puts what needs attention first when sorting by status', () => {
    expect(
      sortJobs(jobs, { by: 'status', order: 'asc' }).map(job => job.status)
    ).toEqual(['RUNNING', 'QUEUED', 'FAILED', 'COMPLETED']);
  });

  it('breaks ties newest first, so the order is stable between refreshes', () => {
    const [older, newer] = listedJobs([
      ['x', 'same', '2024-01-01T00:00:00Z'],
      ['y', 'same', '2024-02-01T00:00:00Z']
    ]);
    expect(ids(sortJobs([older, newer], { by: 'name', order: 'asc' }))).toEqual(
      ['y', 'x']
    );
  });

  it('leaves the list it was given untouched', () => {
    const given = [...jobs];
    sortJobs(given, { by: 'name', order: 'asc' });
    expect(ids(given)).toEqual(ids(jobs));
  });
});

describe('hasUnfinishedJobs, whether the panel keeps refreshing', () => {
  it('is true while a job is queued, running or stopping', () => {
    expect(hasUnfinishedJobs(jobs)).toBe(true);
    expect(hasUnfinishedJobs([makeJob({ status: 'STOPPING' })])).toBe(true);
  });

  it('is false once every job is final, or there are none', () => {
    expect(hasUnfinishedJobs([sweep, eval2])).toBe(false);
    expect(hasUnfinishedJobs([])).toBe(false);
  });
});

describe('upsertJob', () => {
  it('adds a new job first', () => {
    const created = makeJob({ job_id: 'e-5' });
    expect(ids(upsertJob(jobs, created))).toEqual([
      'e-5',
      'a-1',
      'b-2',
      'c-3',
      'd-4'
    ]);
  });

  it('replaces a job it already holds, in place', () => {
    const done = { ...train, status: 'COMPLETED' as const };
    const updated = upsertJob(jobs, done);
    expect(ids(updated)).toEqual(ids(jobs));
    expect(updated[0].status).toBe('COMPLETED');
    expect(jobs[0].status).toBe('RUNNING');
  });
});
