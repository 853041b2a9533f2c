/**
 * The yes-or-no questions the lab asks before it goes on: stop or delete a job,
 * pipeline or schedule; save unsaved notebooks before they run.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';

export interface IQuestion {
  title: string;
  body: string;
  /**
   * The button that goes back (Cancel, Keep running).
   */
  keep: string;
  /**
   * The button that goes on (Stop pipeline, Save and Continue).
   */
  act: string;
  /**
   * Whether going on loses something (the button is then a warning).
   */
  warn?: boolean;
}

/**
 * Ask `question`; true when the person chose to go on.
 */
export async function ask(question: IQuestion): Promise<boolean> {
  const act = question.warn ? Dialog.warnButton : Dialog.okButton;
  const answer = await showDialog({
    title: question.title,
    body: question.body,
    buttons: [
      Dialog.cancelButton({ label: question.keep }),
      act({ label: question.act })
    ]
  });
  return answer.button.accept;
}

/**
 * Ask to save unsaved notebooks before a job or pipeline runs them (it runs them as
 * saved). Save and Continue only opens the next form: nothing is submitted yet.
 */
export function askToSaveFirst(
  trans: TranslationBundle,
  title: string,
  body: string
): Promise<boolean> {
  return ask({
    title,
    body,
    keep: trans.__('Cancel'),
    act: trans.__('Save and Continue')
  });
}
