import {
  availableFlavors,
  deadlineHint,
  deadlineMinutes,
  deadlineProblem,
  defaultFlavor,
  flavorLoad,
  flavorSummary
} from '../flavors';
import { makeFlavor } from '../../__tests__/jobs.fixture';

describe('which flavors the dialog offers', () => {
  const cpu = makeFlavor({ id: 'cpu', gpu: null, default: true });
  const a100 = makeFlavor({
    id: 'a100',
    available: false,
    reason: 'Research allocations only.'
  });
  const quarter = makeFlavor({ id: 'quarter-4090' });

  it('lists only the available flavors, in the server’s order', () => {
    expect(availableFlavors([a100, quarter, cpu]).map(f => f.id)).toEqual([
      'quarter-4090',
      'cpu'
    ]);
  });

  it('preselects the server’s default flavor when it is available', () => {
    expect(defaultFlavor([quarter, cpu])?.id).toBe('cpu');
  });

  it('preselects the first available flavor when the default is not open', () => {
    const closedDefault = makeFlavor({
      id: 'whole',
      default: true,
      available: false
    });
    const plainCpu = makeFlavor({ id: 'cpu', gpu: null });
    expect(defaultFlavor([closedDefault, quarter, plainCpu])?.id).toBe(
      'quarter-4090'
    );
  });

  it('preselects nothing when no flavor is open to the user', () => {
    expect(defaultFlavor([a100])).toBeNull();
    expect(defaultFlavor([])).toBeNull();
  });
});

describe('flavors in words', () => {
  it('puts the GPU first, then CPU and memory', () => {
    expect(
      flavorSummary({ gpu: '1 x A100 80 GB', resources: '8 CPU, 32 GiB' })
    ).toBe('1 x A100 80 GB, 8 CPU, 32 GiB');
    expect(
      flavorSummary({ gpu: '1/4 of an RTX 4090', resources: '2 CPUs, 8 GiB' })
    ).toBe('1/4 of an RTX 4090, 2 CPUs, 8 GiB');
  });

  it('says "No GPU" for a CPU flavor and leaves out missing resources', () => {
    expect(flavorSummary({ gpu: null, resources: '2 CPUs, 4 GiB' })).toBe(
      'No GPU, 2 CPUs, 4 GiB'
    );
    expect(flavorSummary({ gpu: '1/4 of an RTX 4090', resources: '' })).toBe(
      '1/4 of an RTX 4090'
    );
  });

  it('shows how many jobs run and wait on the flavor', () => {
    expect(flavorLoad({ running: 2, queued: 1 })).toBe('2 running, 1 queued');
    expect(flavorLoad({ running: 0, queued: 0 })).toBe('0 running, 0 queued');
  });
});

describe('the deadline field, in minutes', () => {
  it('starts at the flavor’s default and stops at its maximum', () => {
    expect(
      deadlineMinutes({
        default_deadline_seconds: 1800,
        max_deadline_seconds: 4 * 3600
      })
    ).toEqual({ initial: 30, max: 240 });
  });

  it('rounds a default up and a maximum down to whole minutes', () => {
    expect(
      deadlineMinutes({
        default_deadline_seconds: 90,
        max_deadline_seconds: 150
      })
    ).toEqual({ initial: 2, max: 2 });
  });

  it('keeps the default within the maximum and at least a minute', () => {
    expect(
      deadlineMinutes({
        default_deadline_seconds: 7200,
        max_deadline_seconds: 3600
      })
    ).toEqual({ initial: 60, max: 60 });
    expect(
      deadlineMinutes({ default_deadline_seconds: 0, max_deadline_seconds: 10 })
    ).toEqual({ initial: 1, max: 1 });
  });

  it('accepts whole minutes within the flavor’s bounds', () => {
    const flavor = makeFlavor();
    expect(deadlineProblem('1', flavor)).toBeNull();
    expect(deadlineProblem(' 240 ', flavor)).toBeNull();
  });

  it('explains what is wrong with other deadlines', () => {
    const flavor = makeFlavor();
    const sentence =
      'Give the deadline in whole minutes, from 1 to 240 (4 h) for this flavor.';
    for (const text of ['0', '241', '1.5', '', 'soon', '-5']) {
      expect(deadlineProblem(text, flavor)).toBe(sentence);
    }
  });

  it('states the limits in words', () => {
    expect(deadlineHint(makeFlavor())).toBe('default 30 min, at most 4 h');
  });
});
