/**
 * Reclaim warnings: "your server will be stopped", as the server extension relays them
 * from the hub's course-sessions service (`api/reclaim`), and what the lab makes of them.
 */
import { formatDuration } from '../common/format';
import { ICountdown } from './countdown';

const MINUTE = 60 * 1000;

/**
 * Why the hub takes a server back.
 */
export type ReclaimReason =
  'idle' | 'grant-expired' | 'unopened-prewarm' | 'class-ended';

/**
 * One server's reclaim warning (the service's `ReclaimWarning.to_json`).
 */
export interface IReclaimWarning {
  server: string;
  profile: string;
  reason: ReclaimReason;
  /**
   * When the server stops (UTC, ISO 8601).
   */
  stop_at: string;
  /**
   * Seconds left when the service answered (the lab counts from its own clock).
   */
  seconds_left: number;
  /**
   * Whether "I'm still using it" may keep the server (once per server start).
   */
  can_keep: boolean;
  /**
   * A sentence for the user: what stops, when, and why.
   */
  message: string;
}

/**
 * `GET api/reclaim`.
 */
export interface IReclaimAnswer {
  warning: IReclaimWarning | null;
}

/**
 * `POST api/reclaim/keep`.
 */
export interface IKeepAnswer {
  message: string;
  warning: IReclaimWarning | null;
}

/**
 * The reason in a few words, for the status bar.
 */
export const REASON_WORDS: Record<ReclaimReason, string> = {
  idle: 'GPU idle',
  'grant-expired': 'allocation expired',
  'unopened-prewarm': 'not opened',
  'class-ended': 'class over'
};

/**
 * A warning as read at `fetchedAt`: the deadline counts from the lab's own clock, so
 * a browser whose clock is off still shows the right time left.
 */
export interface IReadWarning {
  warning: IReclaimWarning;
  fetchedAt: Date;
}

/**
 * When the server stops, on the lab's clock.
 */
export function reclaimDeadline(read: IReadWarning): Date {
  return new Date(read.fetchedAt.getTime() + read.warning.seconds_left * 1000);
}

/**
 * The status bar's countdown: "stops in 4 min (GPU idle)", always a warning.
 */
export function reclaimCountdown(read: IReadWarning, now: Date): ICountdown {
  const msLeft = Math.max(0, reclaimDeadline(read).getTime() - now.getTime());
  const left =
    msLeft < MINUTE
      ? 'under a minute'
      : formatDuration(Math.ceil(msLeft / MINUTE) * MINUTE);
  return {
    text: `stops in ${left} (${REASON_WORDS[read.warning.reason] ?? read.warning.reason})`,
    warning: true,
    msLeft
  };
}

/**
 * One notification per warning: a new deadline or reason is a new warning.
 */
export function warningKey(warning: IReclaimWarning): string {
  return `${warning.server}\n${warning.reason}\n${warning.stop_at}`;
}

/**
 * From this long before the stop, the lab saves its open, modified documents.
 */
export const SAVE_AHEAD_MS = 60 * 1000;

/**
 * Whether it is time to save before the server stops.
 */
export function timeToSave(read: IReadWarning, now: Date): boolean {
  return reclaimDeadline(read).getTime() - now.getTime() <= SAVE_AHEAD_MS;
}

/**
 * The notification's text: the service's sentence. JupyterLab shows about 140
 * characters of it; the keep button says the rest.
 */
export function notificationText(warning: IReclaimWarning): string {
  return warning.message;
}
