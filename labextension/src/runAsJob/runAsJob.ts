import { TranslationBundle } from '@jupyterlab/translation';

import { JobsAPI } from '../common/api';
import { askToSaveFirst } from '../common/questions';
import { IDescribeJob, IJobServiceConfig } from '../common/models';
import { isSchedule, RunAsJobDialog, RunAsJobResult } from './runAsJobDialog';
import { IRunContext, reachJobService } from './runContext';

/**
 * Run the notebook at `path` as a job: check that the server offers Run as Job,
 * have the notebook saved if it has unsaved changes, then show the dialog.
 *
 * @param path The notebook as the file browser names it (a drive prefix is dropped).
 * @returns The created job (or schedule, when the user chose to repeat it); null when the user cancelled or Run as Job is not
 * available (a notification says why).
 */
export async function runAsJob(
  context: IRunContext,
  path: string
): Promise<RunAsJobResult | null> {
  const { docManager, trans } = context;
  const service = await reachJobService(context);
  if (!service) {
    return null;
  }
  const { api, config } = service;

  const widget = docManager.findWidget(path);
  const documentContext = widget ? docManager.contextForWidget(widget) : null;
  if (documentContext?.model.dirty) {
    const saving = await askToSaveFirst(
      trans,
      trans.__('Save the notebook first?'),
      trans.__(
        'A job runs the notebook as saved, and “%1” has unsaved changes.',
        documentContext.path.split('/').pop() ?? path
      )
    );
    if (!saving) {
      return null;
    }
    await documentContext.save();
  }

  const dialog = new RunAsJobDialog({
    api,
    path: docManager.services.contents.localPath(path),
    config,
    trans
  });
  const result = await dialog.launch();
  return result.button.accept ? result.value : null;
}

/**
 * Run `job` again (the Jobs panel's Rerun): the dialog starts from the job's notebook
 * snapshot, flavor, deadline, outputs and parameters, which the user can change, and
 * names the new job so that none of `takenNames` has its name ("run1 (2)").
 *
 * @returns The new job; null when the user cancelled.
 */
export async function rerunAsJob(options: {
  api: JobsAPI;
  config: IJobServiceConfig;
  trans: TranslationBundle;
  job: IDescribeJob;
  takenNames: readonly string[];
}): Promise<IDescribeJob | null> {
  const { api, config, trans, job, takenNames } = options;
  const dialog = new RunAsJobDialog({
    api,
    path: job.input_path,
    config,
    trans,
    rerun: job,
    takenNames
  });
  const result = await dialog.launch();
  const value = result.button.accept ? result.value : null;
  return value && !isSchedule(value) ? value : null;
}
