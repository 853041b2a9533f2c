import { Dialog, showDialog } from '@jupyterlab/apputils';

import { RunAsJobDialog, RunAsJobResult } from './runAsJobDialog';
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
    const answer = await showDialog({
      title: trans.__('Save the notebook first?'),
      body: trans.__(
        'A job runs the notebook as saved, and “%1” has unsaved changes.',
        documentContext.path.split('/').pop() ?? path
      ),
      buttons: [
        Dialog.cancelButton({ label: trans.__('Cancel') }),
        // It saves, then opens the Run as Job form: nothing is submitted yet.
        Dialog.okButton({ label: trans.__('Save and Continue') })
      ]
    });
    if (!answer.button.accept) {
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
