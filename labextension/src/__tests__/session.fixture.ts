import { IServerSession } from '../common/models';
import { IReclaimWarning } from '../session/reclaim';

/**
 * A minute in milliseconds, as the countdowns count.
 */
export const MINUTE = 60 * 1000;

/**
 * The server's session as the API describes it, with `overrides` on top of a
 * course server with a GPU share and no end times.
 */
export function makeServerSession(
  overrides: Partial<IServerSession> = {}
): IServerSession {
  return {
    profile: 'ML101 lab',
    gpu_share: '1/4 of an RTX 4090, 6 GiB',
    class_end: null,
    session_end: null,
    ...overrides
  };
}

/**
 * A reclaim warning as the API describes it, with `overrides` on top of an idle
 * GPU's warning (stops at 09:30 UTC, eight minutes after it was read, can be kept).
 */
export function makeIdleWarning(
  overrides: Partial<IReclaimWarning> = {}
): IReclaimWarning {
  return {
    server: '',
    profile: 'ml101',
    reason: 'idle',
    stop_at: '2025-03-03T09:30:00Z',
    seconds_left: 480,
    can_keep: true,
    message:
      'Your server will be stopped at 10:30: its GPU has not been used for ' +
      '30 min. Save your work.',
    ...overrides
  };
}
