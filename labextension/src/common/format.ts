/**
 * Text shown to users for job timings in the Jobs panel: durations and moments.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * Format how long a job ran (or has been running) for the Jobs panel.
 *
 * Under a minute reads in seconds ("45 s"), under an hour in whole minutes
 * ("12 min"), longer in hours and minutes ("1 h 5 min", "3 h"). Partial units
 * are dropped rather than rounded up, so a job is never shown as longer than
 * it ran.
 *
 * @param ms Duration in milliseconds. Negative values, which appear when the
 * browser clock is behind the hub's, read as "0 s".
 * @returns The duration as short text.
 * @throws RangeError when `ms` is not a finite number.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) {
    throw new RangeError(`A duration must be a finite number, got ${ms}.`);
  }
  const clamped = Math.max(0, ms);
  if (clamped < MINUTE) {
    return `${Math.floor(clamped / SECOND)} s`;
  }
  if (clamped < HOUR) {
    return `${Math.floor(clamped / MINUTE)} min`;
  }
  const hours = Math.floor(clamped / HOUR);
  const minutes = Math.floor((clamped % HOUR) / MINUTE);
  return minutes === 0 ? `${hours} h` : `${hours} h ${minutes} min`;
}

/**
 * Format a moment of a job for the Jobs panel, in the browser's time zone, with that
 * zone's short name: "10:15 CET" on the same day as `now`, "2024-05-06 10:15 CET" on
 * another day.
 *
 * @param iso An ISO-8601 time from the job API; null or unreadable reads as "—".
 * @param now The current time (for "same day").
 */
export function formatTime(iso: string | null, now: Date = new Date()): string {
  const moment = parseTime(iso);
  if (moment === null) {
    return '—';
  }
  const clock = clockOf(moment);
  const withZone = (text: string) => withZoneOf(moment, text);
  const sameDay =
    moment.getFullYear() === now.getFullYear() &&
    moment.getMonth() === now.getMonth() &&
    moment.getDate() === now.getDate();
  if (sameDay) {
    return withZone(clock);
  }
  const day = `${moment.getFullYear()}-${pad(moment.getMonth() + 1)}-${pad(moment.getDate())}`;
  return withZone(`${day} ${clock}`);
}

/**
 * The short name of the time zone at `moment` ("EST", "UTC", "MEZ"), in the browser's
 * language, as the hub's pages name it; of the browser's own zone unless `timeZone`
 * (an IANA name) is given.
 */
export function zoneName(
  moment: Date,
  timeZone?: string,
  locale?: string
): string {
  const parts = new Intl.DateTimeFormat(locale, {
    timeZone,
    timeZoneName: 'short'
  }).formatToParts(moment);
  return parts.find(part => part.type === 'timeZoneName')?.value ?? '';
}

/**
 * A moment told as the hub's pages tell it, in the browser's zone with that zone's
 * short name: "12:10 CET" today, "tomorrow 10:00 CET", "Mon 10:00 CET" within the
 * week, "Mon 7 Dec 10:00 CET" further away (gpuspawner/templates/local_times.html).
 *
 * @param iso An ISO-8601 time; null or unreadable reads as "—".
 * @param now The current time.
 */
export function tellMoment(iso: string | null, now: Date = new Date()): string {
  const moment = parseTime(iso);
  if (moment === null) {
    return '—';
  }
  const dayNumber = (date: Date) =>
    Date.UTC(date.getFullYear(), date.getMonth(), date.getDate()) / 86400000;
  const days = dayNumber(moment) - dayNumber(now);
  const clock = clockOf(moment);
  const weekday = new Intl.DateTimeFormat('en-GB', { weekday: 'short' }).format(
    moment
  );
  let words = clock;
  if (days === 1) {
    words = `tomorrow ${clock}`;
  } else if (days > 1 && days < 7) {
    words = `${weekday} ${clock}`;
  } else if (days !== 0) {
    const month = new Intl.DateTimeFormat('en-GB', { month: 'short' }).format(
      moment
    );
    words = `${weekday} ${moment.getDate()} ${month} ${clock}`;
  }
  return withZoneOf(moment, words);
}

/**
 * A sentence from the job API with moments in it ("... (renews {0})"), each told
 * in the browser's zone by {@link tellMoment}; "{{" and "}}" read as braces.
 *
 * @param pattern The sentence with "{i}" for `moments[i]`.
 * @param moments ISO-8601 times.
 * @param now The current time.
 */
export function tellPattern(
  pattern: string,
  moments: string[],
  now: Date = new Date()
): string {
  return pattern.replace(/\{\{|\}\}|\{(\d+)\}/g, (match, index) => {
    if (index === undefined) {
      return match[0];
    }
    return tellMoment(moments[Number(index)] ?? null, now);
  });
}

/**
 * How long a job has run: from its start to its end, or to `now` while it runs.
 *
 * @returns Milliseconds, or null when the job has not started.
 */
export function elapsedMs(
  job: { start_time: string | null; end_time: string | null },
  now: Date = new Date()
): number | null {
  const start = parseTime(job.start_time);
  if (start === null) {
    return null;
  }
  const end = parseTime(job.end_time) ?? now;
  return Math.max(0, end.getTime() - start.getTime());
}

/**
 * The elapsed time of a job as text ("12 min"), or "—" when it has not started.
 */
export function formatElapsed(
  job: { start_time: string | null; end_time: string | null },
  now: Date = new Date()
): string {
  const ms = elapsedMs(job, now);
  return ms === null ? '—' : formatDuration(ms);
}

/**
 * A time from the job API as a Date; null for null or an unreadable string.
 */
export function parseTime(iso: string | null | undefined): Date | null {
  if (!iso) {
    return null;
  }
  const moment = new Date(iso);
  return Number.isNaN(moment.getTime()) ? null : moment;
}

/** "09:05": the moment's clock in the browser's zone. */
function clockOf(moment: Date): string {
  return `${pad(moment.getHours())}:${pad(moment.getMinutes())}`;
}

/** `text` followed by the short name of the browser's zone at `moment`, if it has one. */
function withZoneOf(moment: Date, text: string): string {
  const zone = zoneName(moment);
  return zone ? `${text} ${zone}` : text;
}

function pad(value: number): string {
  return String(value).padStart(2, '0');
}
