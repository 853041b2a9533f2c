import { ServerConnection } from '@jupyterlab/services';

import { JobAPIError } from '../errors';
import { retryTransient } from '../retry';

function answered(status: number): JobAPIError {
  return new JobAPIError(new Response(null, { status }), {
    message: `Answered ${status}.`,
    reason: 'test'
  });
}

/**
 * A call that fails with each error of `failures` in turn, then answers 'flavors'.
 */
function flakyCall(failures: unknown[]) {
  const call = jest.fn(async () => {
    const failure = failures[call.mock.calls.length - 1];
    if (failure !== undefined) {
      throw failure;
    }
    return 'flavors';
  });
  return call;
}

describe('retryTransient, for calls the dialog cannot do without', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('tries again after each pause while the service is unavailable, then answers', async () => {
    // Given a service that answers 503 twice, then the list
    const call = flakyCall([answered(503), answered(503)]);

    // When the call is made with pauses of 1 s and 2 s
    const answer = retryTransient(call, [1000, 2000]);

    // Then it is made again after each pause, and the third answer is returned
    await jest.advanceTimersByTimeAsync(999);
    expect(call).toHaveBeenCalledTimes(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(call).toHaveBeenCalledTimes(2);
    await jest.advanceTimersByTimeAsync(2000);
    await expect(answer).resolves.toBe('flavors');
    expect(call).toHaveBeenCalledTimes(3);
  });

  it('tries again when the network failed', async () => {
    const call = flakyCall([
      new ServerConnection.NetworkError(new TypeError('Failed to fetch'))
    ]);
    const answer = retryTransient(call, [1000]);
    await jest.advanceTimersByTimeAsync(1000);
    await expect(answer).resolves.toBe('flavors');
  });

  it('gives up with the last error once the pauses are used up', async () => {
    const call = flakyCall([answered(503), answered(502), answered(504)]);
    const answer = retryTransient(call, [1000, 1000]);
    const failed = expect(answer).rejects.toMatchObject({ status: 504 });
    await jest.advanceTimersByTimeAsync(2000);
    await failed;
    expect(call).toHaveBeenCalledTimes(3);
  });

  it('does not retry a refusal: it would be refused again', async () => {
    const call = flakyCall([answered(403)]);
    await expect(retryTransient(call, [1000])).rejects.toMatchObject({
      status: 403
    });
    expect(call).toHaveBeenCalledTimes(1);
  });

  it('stops when the dialog closed during a pause', async () => {
    const call = flakyCall([answered(503)]);
    const closed = new AbortController();
    const answer = retryTransient(call, [1000], closed.signal);
    const failed = expect(answer).rejects.toMatchObject({ status: 503 });
    await jest.advanceTimersByTimeAsync(0);

    closed.abort();

    await failed;
    expect(call).toHaveBeenCalledTimes(1);
  });
});
