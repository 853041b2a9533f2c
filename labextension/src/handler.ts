import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/**
 * The REST namespace of the jupyter_to_job server extension, the kebab form of
 * its Python name.
 */
export const API_NAMESPACE = 'jupyter-to-job';

/**
 * Call the jupyter_to_job server extension.
 *
 * `ServerConnection` adds the base URL, the XSRF token and the authorization
 * header, so the request goes out as the signed-in user.
 *
 * @param endPoint Path under `<base_url>/jupyter-to-job/`, e.g. `'jobs'`.
 * @param init Fetch options (method, body, headers).
 * @param serverSettings Connection settings; pass
 * `app.serviceManager.serverSettings` from a plugin.
 * @returns The response body parsed as JSON (or its text when it is not JSON).
 * @throws ServerConnection.NetworkError when the server cannot be reached.
 * @throws ServerConnection.ResponseError when it answers with an error status.
 */
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {},
  serverSettings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const requestUrl = URLExt.join(
    serverSettings.baseUrl,
    API_NAMESPACE,
    endPoint
  );

  let response: Response;
  try {
    response = await ServerConnection.makeRequest(
      requestUrl,
      init,
      serverSettings
    );
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }

  let data: any = await response.text();
  if (data.length > 0) {
    try {
      data = JSON.parse(data);
    } catch {
      // Not JSON (a proxy error page, for instance): keep the text so the
      // error below carries it.
    }
  }

  if (!response.ok) {
    throw new ServerConnection.ResponseError(response, data.message || data);
  }
  return data as T;
}
