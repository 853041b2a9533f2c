/**
 * Retrying job API calls that fail for a moment: a server that is still starting, a
 * hub job service that is restarting or too busy to answer.
 */
import { isTransient } from './errors';

/**
 * The pauses, in milliseconds, before each new try of a call the Run as Job dialog
 * cannot do without: about 7 seconds in all before it shows the error and Retry.
 */
export const RETRY_DELAYS_MS: readonly number[] = [1000, 2000, 4000];

/**
 * Call `request`; while it fails transiently (see `isTransient`), call it again after
 * each pause of `delaysMs` in turn.
 *
 * @param request The call, made anew at each try.
 * @param delaysMs The pauses before the second, third... tries.
 * @param signal Ends the retries, for a dialog that was closed.
 * @returns The first answer.
 * @throws The error of the last try: at once when it is not transient, else when the
 * pauses are used up or `signal` is aborted.
 */
export async function retryTransient<T>(
  request: () => Promise<T>,
  delaysMs: readonly number[] = RETRY_DELAYS_MS,
  signal?: AbortSignal
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await request();
    } catch (error) {
      if (!isTransient(error) || attempt >= delaysMs.length) {
        throw error;
      }
      await pause(delaysMs[attempt], signal);
      if (signal?.aborted) {
        throw error;
      }
    }
  }
}

function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise(resolve => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
