/**
 * "Repeat on a schedule" in the Run as Job dialog and the pipeline builder: the
 * rhythm (every N minutes or hours, or a cron expression), an optional daily window,
 * the time zone, and the stop conditions. Each field shows its own problem, from the
 * form's checks or the server's.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { classes } from '@jupyterlab/ui-components';
import * as React from 'react';

import { Checkbox, Field, FieldGroup } from '../common/formFields';

import {
  defaultScheduleForm,
  IScheduleForm,
  problemsAfterEdit,
  ruleText,
  ScheduleField,
  ScheduleProblems
} from './scheduleRule';
import { Hint } from '../common/hint';

/**
 * What the schedule fields show and change.
 */
export interface IScheduleFieldsProps {
  form: IScheduleForm;
  onChange: (changes: Partial<IScheduleForm>) => void;
  problems: ScheduleProblems;
  trans: TranslationBundle;
}

/**
 * The problem of one field, tied to its input by `aria-describedby`.
 */
function Problem(props: {
  field: ScheduleField;
  problems: ScheduleProblems;
}): JSX.Element | null {
  const message = props.problems[props.field];
  if (!message) {
    return null;
  }
  return (
    <span
      className="jp-JupyterToJob-fieldError"
      id={problemId(props.field)}
      role="alert"
      data-testid={`schedule-error-${props.field}`}
    >
      {message}
    </span>
  );
}

function problemId(field: ScheduleField): string {
  return `jp-JupyterToJob-scheduleError-${field}`;
}

function invalid(
  field: ScheduleField,
  problems: ScheduleProblems
): { 'aria-invalid'?: true; 'aria-describedby'?: string } {
  return problems[field]
    ? { 'aria-invalid': true, 'aria-describedby': problemId(field) }
    : {};
}

/**
 * The schedule part of the dialog, shown once "Repeat on a schedule" is ticked.
 */
export function ScheduleFields(props: IScheduleFieldsProps): JSX.Element {
  const { form, onChange, problems, trans } = props;
  // `shown`: whether this input is the one the problem is about (of the two ways
  // to say how often, only the chosen one is outlined).
  const inputClass = (field: ScheduleField, extra = '', shown = true) =>
    classes(
      'jp-mod-styled jp-JupyterToJob-input',
      extra,
      shown && problems[field] && 'jp-mod-error'
    );
  const preview = previewOf(form);
  return (
    <FieldGroup
      className="jp-JupyterToJob-schedule"
      testid="schedule-fields"
      legend={trans.__('Schedule')}
    >
      <div
        className="jp-JupyterToJob-scheduleRow"
        role="radiogroup"
        aria-label={trans.__('How often')}
      >
        <label className="jp-JupyterToJob-checkbox">
          <input
            type="radio"
            name="schedule-rhythm"
            data-testid="schedule-rhythm-interval"
            checked={form.rhythm === 'interval'}
            onChange={() => onChange({ rhythm: 'interval' })}
          />
          {trans.__('Every')}
        </label>
        <input
          type="number"
          min={1}
          step={1}
          aria-label={trans.__('Number of minutes or hours between runs')}
          data-testid="schedule-interval-count"
          className={inputClass(
            'rhythm',
            'jp-JupyterToJob-number',
            form.rhythm === 'interval'
          )}
          disabled={form.rhythm !== 'interval'}
          value={form.intervalCount}
          {...(form.rhythm === 'interval' ? invalid('rhythm', problems) : {})}
          onChange={event => onChange({ intervalCount: event.target.value })}
        />
        <select
          className="jp-mod-styled"
          aria-label={trans.__('Unit of the interval')}
          data-testid="schedule-interval-unit"
          disabled={form.rhythm !== 'interval'}
          value={form.intervalUnit}
          onChange={event =>
            onChange({
              intervalUnit: event.target.value as IScheduleForm['intervalUnit']
            })
          }
        >
          <option value="minutes">{trans.__('minutes')}</option>
          <option value="hours">{trans.__('hours')}</option>
        </select>
      </div>
      <div className="jp-JupyterToJob-scheduleRow">
        <label className="jp-JupyterToJob-checkbox">
          <input
            type="radio"
            name="schedule-rhythm"
            data-testid="schedule-rhythm-cron"
            checked={form.rhythm === 'cron'}
            onChange={() => onChange({ rhythm: 'cron' })}
          />
          {trans.__('Cron expression')}
        </label>
        <input
          aria-label={trans.__('Cron expression')}
          data-testid="schedule-cron"
          className={inputClass(
            'rhythm',
            'jp-JupyterToJob-cron',
            form.rhythm === 'cron'
          )}
          disabled={form.rhythm !== 'cron'}
          placeholder="*/15 9-17 * * 1-5"
          value={form.cron}
          {...(form.rhythm === 'cron' ? invalid('rhythm', problems) : {})}
          onChange={event => onChange({ cron: event.target.value })}
        />
      </div>
      <Problem field="rhythm" problems={problems} />

      <div className="jp-JupyterToJob-scheduleRow">
        <Checkbox
          testid="schedule-use-window"
          checked={form.useWindow}
          onChange={useWindow => onChange({ useWindow })}
          label={trans.__('Only between')}
        />
        <input
          type="time"
          aria-label={trans.__('Window start')}
          data-testid="schedule-window-start"
          className={inputClass('window')}
          disabled={!form.useWindow}
          value={form.windowStart}
          {...invalid('window', problems)}
          onChange={event => onChange({ windowStart: event.target.value })}
        />
        <span>{trans.__('and')}</span>
        <input
          type="time"
          aria-label={trans.__('Window end')}
          data-testid="schedule-window-end"
          className={inputClass('window')}
          disabled={!form.useWindow}
          value={form.windowEnd}
          {...invalid('window', problems)}
          onChange={event => onChange({ windowEnd: event.target.value })}
        />
      </div>
      <Problem field="window" problems={problems} />

      <Field label={trans.__('Time zone')}>
        <input
          data-testid="schedule-timezone"
          className={inputClass('timezone')}
          value={form.timezone}
          {...invalid('timezone', problems)}
          onChange={event => onChange({ timezone: event.target.value })}
        />
        <Problem field="timezone" problems={problems} />
      </Field>

      <div className="jp-JupyterToJob-scheduleStops">
        <Field label={trans.__('End date (optional)')}>
          <input
            type="datetime-local"
            data-testid="schedule-end-date"
            className={inputClass('end_time')}
            value={form.endDate}
            {...invalid('end_time', problems)}
            onChange={event => onChange({ endDate: event.target.value })}
          />
          <Problem field="end_time" problems={problems} />
        </Field>
        <Field label={trans.__('Max runs (optional)')}>
          <input
            type="number"
            min={1}
            step={1}
            data-testid="schedule-max-runs"
            className={inputClass('max_runs', 'jp-JupyterToJob-number')}
            value={form.maxRuns}
            {...invalid('max_runs', problems)}
            onChange={event => onChange({ maxRuns: event.target.value })}
          />
          <Problem field="max_runs" problems={problems} />
        </Field>
        <Field label={trans.__('Stop after failures in a row (optional)')}>
          <input
            type="number"
            min={1}
            step={1}
            data-testid="schedule-max-failures"
            className={inputClass(
              'max_failures_in_a_row',
              'jp-JupyterToJob-number'
            )}
            value={form.maxFailures}
            {...invalid('max_failures_in_a_row', problems)}
            onChange={event => onChange({ maxFailures: event.target.value })}
          />
          <Problem field="max_failures_in_a_row" problems={problems} />
        </Field>
      </div>
      {preview && (
        <Hint testid="schedule-preview">{trans.__('Runs: %1.', preview)}</Hint>
      )}
    </FieldGroup>
  );
}

/**
 * The state of "Repeat on a schedule" in a dialog: whether it is ticked, the
 * schedule's fields and each field's problem.
 */
export interface IScheduleRepeat {
  repeat: boolean;
  setRepeat: (repeat: boolean) => void;
  form: IScheduleForm;
  setForm: React.Dispatch<React.SetStateAction<IScheduleForm>>;
  problems: ScheduleProblems;
  setProblems: React.Dispatch<React.SetStateAction<ScheduleProblems>>;
}

/**
 * Keep the state of "Repeat on a schedule" (unticked, the default rule).
 */
export function useScheduleRepeat(): IScheduleRepeat {
  const [repeat, setRepeat] = React.useState(false);
  const [form, setForm] = React.useState<IScheduleForm>(() =>
    defaultScheduleForm()
  );
  const [problems, setProblems] = React.useState<ScheduleProblems>({});
  return { repeat, setRepeat, form, setForm, problems, setProblems };
}

/**
 * The "Repeat on a schedule" box and, once ticked, the schedule's fields; ticking
 * or unticking clears the fields' problems and tells `onRepeatChange` (the dialog
 * renames its button).
 */
export function RepeatOnSchedule(props: {
  state: IScheduleRepeat;
  onRepeatChange: (repeat: boolean) => void;
  trans: TranslationBundle;
}): JSX.Element {
  const { state, trans } = props;
  return (
    <>
      <Checkbox
        testid="schedule-repeat-checkbox"
        checked={state.repeat}
        onChange={repeat => {
          state.setRepeat(repeat);
          state.setProblems({});
          props.onRepeatChange(repeat);
        }}
        label={trans.__('Repeat on a schedule')}
      />
      {state.repeat && (
        <ScheduleFields
          form={state.form}
          onChange={changes => {
            state.setForm(current => ({ ...current, ...changes }));
            state.setProblems(current => problemsAfterEdit(current, changes));
          }}
          problems={state.problems}
          trans={trans}
        />
      )}
    </>
  );
}

/**
 * The rule as it reads from the form so far; empty while it cannot be read.
 */
function previewOf(form: IScheduleForm): string {
  const count = Number(form.intervalCount);
  const intervalSeconds =
    form.rhythm === 'interval' && Number.isInteger(count) && count > 0
      ? count * (form.intervalUnit === 'hours' ? 3600 : 60)
      : null;
  if (form.rhythm === 'interval' && intervalSeconds === null) {
    return '';
  }
  return ruleText({
    cron: form.rhythm === 'cron' ? form.cron : null,
    interval_seconds: intervalSeconds,
    window:
      form.useWindow && form.windowStart && form.windowEnd
        ? { start: form.windowStart, end: form.windowEnd }
        : null,
    timezone: form.timezone
  });
}
