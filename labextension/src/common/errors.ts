import { ServerConnection } from '@jupyterlab/services';

import { IErrorResponse, IFieldProblem } from './models';

/**
 * The sentence shown when the browser cannot reach the notebook server at all.
 */
export const SERVER_UNREACHABLE =
  'JupyterLab cannot reach your server. Check your network connection, then reload the page.';

/**
 * The sentence shown when the server has no Run as Job extension (404 on `api/config`).
 */
export const EXTENSION_MISSING =
  'Run as Job is not available on this server: its server extension (jupyter_to_job) is not ' +
  'installed or not enabled. Ask the hub admins to enable it, then restart your server ' +
  '(File → Hub Control Panel → Stop My Server, then Start My Server).';

/**
 * The sentence shown on a 503 that carries no sentence of its own.
 */
export const SERVICE_UNAVAILABLE =
  'The job service of the hub cannot be reached right now. Try again in a minute; your ' +
  'notebooks and earlier jobs are not affected.';

/**
 * An error answer of the job API: HTTP status, the server's sentence and its reason code.
 */
export class JobAPIError extends ServerConnection.ResponseError {
  /**
   * @param response The failed response.
   * @param body Its parsed body: an `IErrorResponse`, or text when it was not JSON
   * (a proxy's error page, or Jupyter's 404 page when the extension is missing).
   */
  constructor(response: Response, body: unknown) {
    const parsed = asErrorResponse(body);
    const status = [response.status, response.statusText].join(' ').trim();
    super(response, parsed?.message || `The server answered ${status}.`);
    this.name = 'JobAPIError';
    this.reason = parsed?.reason ?? null;
    this.problems = parsed?.errors ?? [];
  }

  /**
   * The HTTP status of the answer.
   */
  get status(): number {
    return this.response.status;
  }

  /**
   * The short machine label ("not-found", "invalid", "full"...); null when the answer
   * did not come from the job API (no JSON error body).
   */
  readonly reason: string | null;

  /**
   * For a 400 on a request body: each wrong field.
   */
  readonly problems: IFieldProblem[];
}

/**
 * The sentence to show a user for any error of a job API call.
 */
export function errorSentence(error: unknown): string {
  if (error instanceof ServerConnection.NetworkError) {
    return SERVER_UNREACHABLE;
  }
  if (error instanceof JobAPIError) {
    if (error.status === 503 && !error.reason) {
      return SERVICE_UNAVAILABLE;
    }
    return error.message;
  }
  if (error instanceof Error && error.message) {
    return error.message;
  }
  return String(error);
}

/**
 * Why Run as Job cannot be used at all, from the error of `GET api/config`.
 *
 * A 404 without the job API's JSON body means the server extension is missing; a
 * 503 means the hub's job service is down (the server says so in its sentence).
 */
export function unavailableSentence(error: unknown): string {
  if (
    error instanceof JobAPIError &&
    error.status === 404 &&
    error.reason === null
  ) {
    return EXTENSION_MISSING;
  }
  return errorSentence(error);
}

/**
 * True for errors worth retrying by themselves: the network, or a service that is down.
 */
export function isTransient(error: unknown): boolean {
  if (error instanceof ServerConnection.NetworkError) {
    return true;
  }
  return error instanceof JobAPIError && [502, 503, 504].includes(error.status);
}

function asErrorResponse(body: unknown): IErrorResponse | null {
  if (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as IErrorResponse).message === 'string'
  ) {
    return body as IErrorResponse;
  }
  return null;
}
