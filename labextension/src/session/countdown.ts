/**
 * The status bar's text for a course session: the server's GPU share and the time
 * left until the class (or the session) ends, with a warning near the end.
 */
import { formatDuration, formatTime, parseTime } from '../common/format';
import { IServerSession } from '../common/models';

const MINUTE = 60 * 1000;

/**
 * From this many minutes before the end, the countdown turns into a warning.
 */
export const WARNING_MINUTES = 10;

/**
 * The time left in the course session.
 */
export interface ICountdown {
  /**
   * "class ends in 42 min", "session ends in under a minute".
   */
  text: string;
  /**
   * True in the last `WARNING_MINUTES` minutes.
   */
  warning: boolean;
  /**
   * Milliseconds left.
   */
  msLeft: number;
}

/**
 * What the status bar item shows.
 */
export interface ISessionStatusText {
  /**
   * "GPU: 1/4 of an RTX 4090, 6 GiB" or "No GPU".
   */
  gpu: string;
  countdown: ICountdown | null;
  /**
   * The tooltip: the profile and when the server stops.
   */
  title: string;
}

/**
 * The GPU share of the server in words. The spawner writes "No GPU" itself for a
 * server without one; a server outside the hub has no share at all.
 */
export function gpuShareText(session: IServerSession): string {
  const share = session.gpu_share?.trim();
  if (!share || share.toLowerCase() === 'no gpu') {
    return 'No GPU';
  }
  return `GPU: ${share}`;
}

/**
 * The time left until the class ends, or, once it has ended (grace time), until the
 * session ends and the server stops; null outside a course session.
 *
 * Minutes are rounded up, so "1 min" is shown until the very end.
 */
export function sessionCountdown(
  session: IServerSession,
  now: Date
): ICountdown | null {
  const targets: [string | null, string][] = [
    [session.class_end, 'class ends'],
    [session.session_end, 'session ends']
  ];
  for (const [iso, what] of targets) {
    const end = parseTime(iso);
    if (end === null) {
      continue;
    }
    const msLeft = end.getTime() - now.getTime();
    if (msLeft <= 0) {
      continue;
    }
    const left =
      msLeft < MINUTE
        ? 'under a minute'
        : formatDuration(Math.ceil(msLeft / MINUTE) * MINUTE);
    return {
      text: `${what} in ${left}`,
      warning: msLeft <= WARNING_MINUTES * MINUTE,
      msLeft
    };
  }
  return null;
}

/**
 * Everything the status bar item shows for `session` at `now`.
 */
export function sessionStatusText(
  session: IServerSession,
  now: Date
): ISessionStatusText {
  const lines = [
    session.profile ? `Profile: ${session.profile}` : '',
    gpuShareText(session)
  ];
  const stop = parseTime(session.session_end);
  if (stop !== null && stop.getTime() > now.getTime()) {
    lines.push(
      `Your server stops at ${formatTime(session.session_end, now)}: ` +
        'save your work before then, and run longer work as a job.'
    );
  }
  return {
    gpu: gpuShareText(session),
    countdown: sessionCountdown(session, now),
    title: lines.filter(Boolean).join('\n')
  };
}
