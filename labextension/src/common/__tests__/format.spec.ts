import {
  elapsedMs,
  formatDuration,
  formatElapsed,
  formatTime,
  tellMoment,
  tellPattern,
  zoneName
} from '../format';

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

describe('zoneName, the short name of a time zone', () => {
  const winter = new Date(Date.UTC(2026, 0, 12, 15, 0));
  const summer = new Date(Date.UTC(2026, 6, 13, 15, 0));

  it('names the zone as people there read it, and follows daylight saving time', () => {
    expect(zoneName(winter, 'America/New_York', 'en-US')).toBe('EST');
    expect(zoneName(summer, 'America/New_York', 'en-US')).toBe('EDT');
    expect(zoneName(winter, 'UTC', 'en-US')).toBe('UTC');
  });

  it('names the browser’s own zone when none is given', () => {
    const own = Intl.DateTimeFormat().resolvedOptions().timeZone;
    expect(zoneName(winter)).toBe(zoneName(winter, own));
    expect(zoneName(winter)).not.toBe('');
  });
});

describe('formatTime, the moments of a job in the browser’s time zone', () => {
  const now = new Date(2024, 4, 6, 18, 0);

  it('shows only the clock time on the same day', () => {
    const iso = new Date(2024, 4, 6, 9, 5).toISOString();
    expect(formatTime(iso, now)).toBe(`09:05 ${zoneName(new Date(iso))}`);
  });

  it('adds the date on another day', () => {
    const iso = new Date(2024, 4, 5, 23, 59).toISOString();
    expect(formatTime(iso, now)).toBe(
      `2024-05-05 23:59 ${zoneName(new Date(iso))}`
    );
  });

  it('shows a dash for a moment that has not happened or cannot be read', () => {
    expect(formatTime(null, now)).toBe('—');
    expect(formatTime('not a time', now)).toBe('—');
  });
});

describe('tellMoment and tellPattern, moments in sentences as the hub tells them', () => {
  // Saturday 28 November 2026, 10:00 in the browser's zone
  const now = new Date(2026, 10, 28, 10, 0);
  const at = (...parts: [number, number, number, number, number]) =>
    new Date(...parts).toISOString();
  const zone = (iso: string) => zoneName(new Date(iso));

  it('tells today by the clock, tomorrow, this week by weekday, later by date', () => {
    const today = at(2026, 10, 28, 12, 10);
    const tomorrow = at(2026, 10, 29, 9, 0);
    const monday = at(2026, 10, 30, 0, 0);
    const later = at(2026, 11, 7, 10, 0);
    expect(tellMoment(today, now)).toBe(`12:10 ${zone(today)}`);
    expect(tellMoment(tomorrow, now)).toBe(`tomorrow 09:00 ${zone(tomorrow)}`);
    expect(tellMoment(monday, now)).toBe(`Mon 00:00 ${zone(monday)}`);
    expect(tellMoment(later, now)).toBe(`Mon 7 Dec 10:00 ${zone(later)}`);
    expect(tellMoment('not a time', now)).toBe('—');
  });

  it('puts each moment in its place and keeps doubled braces as braces', () => {
    const monday = at(2026, 10, 30, 0, 0);
    expect(
      tellPattern(
        '4.5 of your 6 GPU-hours left this week (renews {0})',
        [monday],
        now
      )
    ).toBe(
      `4.5 of your 6 GPU-hours left this week (renews Mon 00:00 ${zone(monday)})`
    );
    expect(tellPattern('a {{literal}} in {0}', [monday], now)).toBe(
      `a {literal} in Mon 00:00 ${zone(monday)}`
    );
  });
});

describe('elapsed time of a job', () => {
  it('runs from start to end for a finished job', () => {
    const job = {
      start_time: '2024-05-06T10:01:00.000Z',
      end_time: '2024-05-06T11:06:30.000Z'
    };
    expect(elapsedMs(job)).toBe(HOUR + 5 * MINUTE + 30 * SECOND);
    expect(formatElapsed(job)).toBe('1 h 5 min');
  });

  it('runs until now for a running job', () => {
    const job = { start_time: '2024-05-06T10:00:00.000Z', end_time: null };
    const now = new Date('2024-05-06T10:12:40.000Z');
    expect(formatElapsed(job, now)).toBe('12 min');
  });

  it('is a dash for a job that has not started', () => {
    expect(elapsedMs({ start_time: null, end_time: null })).toBeNull();
    expect(formatElapsed({ start_time: null, end_time: null })).toBe('—');
  });

  it('is never negative when the browser clock is behind the hub', () => {
    const job = { start_time: '2024-05-06T10:00:10.000Z', end_time: null };
    expect(elapsedMs(job, new Date('2024-05-06T10:00:00.000Z'))).toBe(0);
  });
});
