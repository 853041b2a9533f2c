/**
 * Text shown to users for job timings in the Jobs panel.
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
