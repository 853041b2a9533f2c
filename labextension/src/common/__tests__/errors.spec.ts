import { ServerConnection } from '@jupyterlab/services';

import {
  errorSentence,
  EXTENSION_MISSING,
  isTransient,
  JobAPIError,
  SERVER_UNREACHABLE,
  SERVICE_UNAVAILABLE,
  unavailableSentence
} from '../errors';

function answer(status: number, statusText = ''): Response {
  return new Response(null, { status, statusText });
}

describe('the sentence a user sees for a failed call', () => {
  it('is the server’s own sentence when it sent one', () => {
    const error = new JobAPIError(answer(409), {
      message:
        'The job "train" is still running; stop it first, then delete it.',
      reason: 'not-finished'
    });
    expect(errorSentence(error)).toBe(
      'The job "train" is still running; stop it first, then delete it.'
    );
    expect(error.reason).toBe('not-finished');
  });

  it('lists the wrong fields of a 400', () => {
    const error = new JobAPIError(answer(400), {
      message: 'The request has errors: name: too long.',
      reason: 'invalid',
      errors: [{ field: 'name', message: 'too long' }]
    });
    expect(error.problems).toEqual([{ field: 'name', message: 'too long' }]);
  });

  it('says the server cannot be reached on a network error', () => {
    const error = new ServerConnection.NetworkError(new TypeError('Failed'));
    expect(errorSentence(error)).toBe(SERVER_UNREACHABLE);
  });

  it('explains a bare 503 from a proxy', () => {
    expect(
      errorSentence(new JobAPIError(answer(503), 'Service Unavailable'))
    ).toBe(SERVICE_UNAVAILABLE);
  });
});

describe('why Run as Job cannot be used (the answer to api/config)', () => {
  it('says the server extension is missing on Jupyter’s own 404', () => {
    const error = new JobAPIError(answer(404, 'Not Found'), '<html>404</html>');
    expect(unavailableSentence(error)).toBe(EXTENSION_MISSING);
  });

  it('passes on the sentence of a 503 from the extension (hub service down)', () => {
    const error = new JobAPIError(answer(503), {
      message:
        'The hub’s job service cannot be reached; try again in a minute.',
      reason: 'service-unreachable'
    });
    expect(unavailableSentence(error)).toBe(
      'The hub’s job service cannot be reached; try again in a minute.'
    );
  });

  it('keeps a 404 of the job API itself as its own sentence', () => {
    const error = new JobAPIError(answer(404), {
      message: "There is no job 'x'.",
      reason: 'not-found'
    });
    expect(unavailableSentence(error)).toBe("There is no job 'x'.");
  });
});

describe('isTransient, errors the panel retries by itself', () => {
  it('retries the network and a service that is down', () => {
    expect(
      isTransient(new ServerConnection.NetworkError(new TypeError('x')))
    ).toBe(true);
    expect(isTransient(new JobAPIError(answer(503), null))).toBe(true);
    expect(isTransient(new JobAPIError(answer(502), null))).toBe(true);
  });

  it('does not retry a missing extension or a refusal', () => {
    expect(isTransient(new JobAPIError(answer(404), null))).toBe(false);
    expect(
      isTransient(
        new JobAPIError(answer(403), { message: 'No.', reason: 'forbidden' })
      )
    ).toBe(false);
  });
});
