/**
 * Submitting a form that may repeat on a schedule (the Run as Job dialog, the
 * pipeline builder): with "Repeat on a schedule" ticked, the form creates a
 * schedule instead of its job or pipeline, and the schedule's problems are told
 * at the schedule's fields.
 */
import { TranslationBundle } from '@jupyterlab/translation';

import { JobsAPI } from '../common/api';
import { errorSentence, JobAPIError } from '../common/errors';
import { problemsByField } from '../common/formError';
import { IFieldProblem } from '../common/models';
import { IScheduleRepeat } from './scheduleFields';
import { ISchedule } from './scheduleModels';
import { scheduleFieldOf, ScheduleRequestResult } from './scheduleRule';

/**
 * What submitting a form that may repeat needs from it.
 */
export interface IRepeatableSubmit<T> {
  api: Pick<JobsAPI, 'createSchedule'>;
  /**
   * The form's "Repeat on a schedule" state.
   */
  schedule: IScheduleRepeat;
  /**
   * The schedule made from the form; null when it does not repeat.
   */
  scheduled: ScheduleRequestResult | null;
  /**
   * Create what the form makes when it does not repeat.
   */
  create: () => Promise<T>;
  /**
   * Show the form's sentence; null clears it.
   */
  say: (sentence: string | null) => void;
  /**
   * Show the problems told at no schedule field.
   */
  setProblems: (problems: IFieldProblem[]) => void;
  /**
   * Show, or stop showing, that the form is being submitted.
   */
  setBusy: (busy: boolean) => void;
  trans: TranslationBundle;
}

/**
 * Create the schedule or, when the form does not repeat, what it makes; null when
 * nothing was created. A schedule the form cannot make yet marks the schedule's
 * fields; a refusal is said, its problems at schedule fields next to them and the
 * others in the form's list.
 */
export async function submitRepeatable<T>(
  submit: IRepeatableSubmit<T>
): Promise<T | ISchedule | null> {
  const { schedule, scheduled, trans } = submit;
  if (scheduled && !scheduled.ok) {
    schedule.setProblems(scheduled.problems);
    submit.say(
      trans.__('Some schedule fields need a change; see the marked boxes.')
    );
    return null;
  }
  submit.setBusy(true);
  submit.say(null);
  submit.setProblems([]);
  schedule.setProblems({});
  try {
    if (scheduled?.ok) {
      return await submit.api.createSchedule(scheduled.request);
    }
    return await submit.create();
  } catch (reason) {
    submit.say(errorSentence(reason));
    const all = reason instanceof JobAPIError ? reason.problems : [];
    const { byField, rest } = problemsByField(all, path =>
      scheduled ? scheduleFieldOf(path) : null
    );
    schedule.setProblems(byField);
    submit.setProblems(rest);
    return null;
  } finally {
    submit.setBusy(false);
  }
}
