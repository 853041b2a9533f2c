import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { JobAPIError } from './errors';

/**
 * The REST namespace of the jupyter_to_job server extension, the kebab form of
 * its Python name.
 */
export const API_NAMESPACE = 'jupyter-to-job';

/**
 * The URL of an end point of the server extension.
 *
 * @param endPoint Path under `<base_url>/jupyter-to-job/`, e.g. `'api/jobs'`.
 * @param serverSettings Connection settings (for the base URL).
 */
export function apiURL(
  endPoint: string,
  serverSettings: ServerConnection.ISettings
): string {
  return URLExt.join(serverSettings.baseUrl, API_NAMESPACE, endPoint);
}

/**
 * Send a request to the server extension and return the raw response.
 *
 * `ServerConnection` adds the XSRF token and the authorization header, so the
 * request goes out as the signed-in user. Requests are `cache: 'no-cache'`
 * (always revalidated; the API answers `no-store`): with JupyterLab's default,
 * `no-store`, a bare timestamp is appended to the query as a cache buster, which
 * the job API's strict query models refuse as an unknown field.
 *
 * @throws ServerConnection.NetworkError when the server cannot be reached.
 * @throws JobAPIError when it answers with an error status.
 */
export async function requestRaw(
  endPoint: string,
  init: RequestInit,
  serverSettings: ServerConnection.ISettings
): Promise<Response> {
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(
      apiURL(endPoint, serverSettings),
      { cache: 'no-cache', ...init },
      serverSettings
    );
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  if (!response.ok) {
    throw new JobAPIError(response, parseBody(await response.text()));
  }
  return response;
}

/**
 * Call the jupyter_to_job server extension.
 *
 * @param endPoint Path under `<base_url>/jupyter-to-job/`, e.g. `'api/jobs'`.
 * @param init Fetch options (method, body, headers).
 * @param serverSettings Connection settings; pass
 * `app.serviceManager.serverSettings` from a plugin.
 * @returns The response body parsed as JSON (or its text when it is not JSON;
 * `undefined` for an empty body, as a 204 has).
 * @throws ServerConnection.NetworkError when the server cannot be reached.
 * @throws JobAPIError when it answers with an error status; its message is the
 * server's sentence.
 */
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {},
  serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const response = await requestRaw(endPoint, init, serverSettings);
  return parseBody(await response.text()) as T;
}

function parseBody(text: string): unknown {
  if (text.length === 0) {
    return undefined;
  }
  try {
    return JSON.parse(text);
  } catch {
    // Not JSON (a proxy's error page, for instance): keep the text.
    return text;
  }
}
