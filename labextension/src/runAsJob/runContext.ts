import { Notification } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { ServerConnection } from '@jupyterlab/services';
import { TranslationBundle } from '@jupyterlab/translation';

import { JobsAPI } from '../common/api';
import { unavailableSentence } from '../common/errors';
import { IJobServiceConfig } from '../common/models';

/**
 * What running a notebook as a job, or notebooks as a pipeline, needs.
 */
export interface IRunContext {
  serverSettings: ServerConnection.ISettings;
  docManager: IDocumentManager;
  trans: TranslationBundle;
}

/**
 * The job API and what the server offers (`api/config`); null when the server does
 * not offer Run as Job, and a notification says why.
 */
export async function reachJobService(
  context: IRunContext
): Promise<{ api: JobsAPI; config: IJobServiceConfig } | null> {
  const api = new JobsAPI(context.serverSettings);
  try {
    return { api, config: await api.getConfig() };
  } catch (error) {
    Notification.error(unavailableSentence(error), { autoClose: false });
    return null;
  }
}
