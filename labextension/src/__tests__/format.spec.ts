import { formatDuration } from '../format';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

describe('formatDuration, as the Jobs panel shows how long a job ran', () => {
  it('shows a job that ran under a minute in whole seconds', () => {
    // Given a job that ran 45.8 seconds, when it is formatted,
    // then the partial second is dropped.
    expect(formatDuration(45 * SECOND + 800)).toBe('45 s');
  });

  it('shows a job that just started as 0 s', () => {
    expect(formatDuration(0)).toBe('0 s');
    expect(formatDuration(999)).toBe('0 s');
  });

  it('switches to minutes at one minute and drops the seconds', () => {
    expect(formatDuration(59 * SECOND + 999)).toBe('59 s');
    expect(formatDuration(MINUTE)).toBe('1 min');
    expect(formatDuration(12 * MINUTE + 59 * SECOND)).toBe('12 min');
  });

  it('shows hours and minutes from one hour on', () => {
    expect(formatDuration(59 * MINUTE + 59 * SECOND)).toBe('59 min');
    expect(formatDuration(HOUR + 5 * MINUTE + 30 * SECOND)).toBe('1 h 5 min');
    expect(formatDuration(26 * HOUR + MINUTE)).toBe('26 h 1 min');
  });

  it('leaves out zero minutes on whole hours', () => {
    expect(formatDuration(3 * HOUR)).toBe('3 h');
    expect(formatDuration(3 * HOUR + 59 * SECOND)).toBe('3 h');
  });

  it('reads a negative duration (browser clock behind the hub) as 0 s', () => {
    expect(formatDuration(-2 * SECOND)).toBe('0 s');
  });

  it('refuses a duration that is not a number', () => {
    expect(() => formatDuration(Number.NaN)).toThrow(RangeError);
    expect(() => formatDuration(Number.POSITIVE_INFINITY)).toThrow(
      'A duration must be a finite number, got Infinity.'
    );
  });
});
