import { TranslationBundle } from '@jupyterlab/translation';
import { UUID } from '@lumino/coreutils';
import * as React from 'react';

import { featuresOf, JobsAPI } from '../common/api';
import { errorSentence } from '../common/errors';
import { FlavorPicker, useFlavorList } from './flavorPicker';
import {
  availableFlavors,
  deadlineHint,
  deadlineMinutes,
  deadlineProblem,
  defaultFlavor
} from './flavors';
import { FormBody, FormDialog } from '../common/formDialog';
import { FormError } from '../common/formError';
import { Checkbox, Field } from '../common/formFields';
import {
  IDescribeJob,
  IFieldProblem,
  IJobFlavorInfo,
  IJobServiceConfig,
  INotebookParameter,
  JsonValue
} from '../common/models';
import { ParameterEditor } from './parameterEditor';
import { changedParameters, editableText, rerunTexts } from './parameters';
import { retryTransient } from '../common/retry';
import {
  RepeatOnSchedule,
  useScheduleRepeat
} from '../schedules/scheduleFields';
import { ISchedule } from '../schedules/scheduleModels';
import { submitRepeatable } from '../schedules/repeatable';
import { scheduleRequest } from '../schedules/scheduleRule';
import {
  createRequest,
  defaultJobName,
  notebookStem,
  rerunName
} from './submission';
import { Hint } from '../common/hint';

/**
 * What the dialog made: a job, or a schedule ("Repeat on a schedule").
 */
export type RunAsJobResult = IDescribeJob | ISchedule;

/**
 * True when the dialog made a schedule rather than a one-off job.
 */
export function isSchedule(result: RunAsJobResult): result is ISchedule {
  // A job names the schedule that started it too: a job is what has a job_id.
  return !('job_id' in result);
}

/**
 * What the Run as Job dialog needs.
 */
export interface IRunAsJobOptions {
  api: JobsAPI;
  /**
   * The saved notebook, relative to the server root.
   */
  path: string;
  /**
   * The server's answer to `api/config` (features decide which fields show).
   */
  config: IJobServiceConfig;
  trans: TranslationBundle;
  /**
   * The job to run again (Rerun): the dialog starts from its notebook snapshot, flavor,
   * deadline, outputs and parameters, under a name none of `takenNames` has.
   */
  rerun?: IDescribeJob | null;
  /**
   * The names of the user's jobs (a rerun's name is one that is not among them).
   */
  takenNames?: readonly string[];
}

/**
 * The Run as Job dialog. Submit stays disabled until the flavors and the notebook's
 * parameters are loaded and a flavor is selected; it sends the job and closes the
 * dialog only when the server has accepted it, otherwise the server's sentence shows
 * in the dialog. Every submit of one dialog carries the same idempotency token, so a
 * double click or a retry after a lost answer starts one job.
 */
export class RunAsJobDialog extends FormDialog<RunAsJobResult | null> {
  constructor(options: IRunAsJobOptions) {
    const { trans } = options;
    const form = new RunAsJobForm(options);
    super({
      title: options.rerun
        ? trans.__('Run “%1” again', options.rerun.name)
        : trans.__('Run “%1” as a job', notebookStem(options.path)),
      body: form,
      trans,
      submitLabel: trans.__('Submit'),
      focusNodeSelector: 'input[name="job-name"]'
    });
    this._form = form;
    this._submitNode = this.node.querySelector<HTMLButtonElement>(
      '.jp-JupyterToJob-submit'
    );
    form.onCanSubmitChange = () => this._syncSubmitButton();
    form.onRepeatChange = repeat =>
      this.renameSubmit(
        repeat ? trans.__('Create Schedule') : trans.__('Submit')
      );
    this._syncSubmitButton();
  }

  /**
   * Submit closes the dialog once the job (or schedule) is created.
   */
  protected async send(): Promise<boolean> {
    if (this._submitting) {
      return false;
    }
    this._submitting = true;
    this._syncSubmitButton();
    try {
      return Boolean(await this._form.submit());
    } finally {
      this._submitting = false;
      this._syncSubmitButton();
    }
  }

  private _syncSubmitButton(): void {
    if (this._submitNode) {
      this._submitNode.disabled = this._submitting || !this._form.canSubmit;
    }
  }

  private _form: RunAsJobForm;
  private _submitNode: HTMLButtonElement | null;
  private _submitting = false;
}

/**
 * The body of the dialog: the form, and the job once the server accepted it.
 */
export class RunAsJobForm extends FormBody<
  IRunAsJobOptions,
  RunAsJobResult | null
> {
  /**
   * Whether the form can be sent now: the flavors and parameters are loaded, a
   * flavor is selected and no submit is under way.
   */
  get canSubmit(): boolean {
    return this._canSubmit;
  }

  /**
   * Called whenever `canSubmit` changes (the dialog enables Submit with it).
   */
  onCanSubmitChange: ((canSubmit: boolean) => void) | null = null;

  /**
   * Called when "Repeat on a schedule" is ticked or unticked.
   */
  onRepeatChange: ((repeat: boolean) => void) | null = null;

  /**
   * Validate and send the form.
   *
   * @returns The new job or schedule; null when the form or the server refused
   * (the form says why), or before the form has rendered.
   */
  async submit(): Promise<RunAsJobResult | null> {
    if (!this._submit) {
      return null;
    }
    const job = await this._submit();
    this._job = job ?? this._job;
    return job;
  }

  /**
   * The job or schedule created (what the dialog resolves with).
   */
  getValue(): RunAsJobResult | null {
    return this._job;
  }

  protected render(): JSX.Element {
    return (
      <RunAsJobFormView
        {...this.options}
        idempotencyToken={this._token}
        bindSubmit={submit => {
          this._submit = submit;
        }}
        onCanSubmitChange={canSubmit => {
          this._canSubmit = canSubmit;
          this.onCanSubmitChange?.(canSubmit);
        }}
        onRepeatChange={repeat => this.onRepeatChange?.(repeat)}
      />
    );
  }

  private readonly _token = UUID.uuid4();
  private _submit: (() => Promise<RunAsJobResult | null>) | null = null;
  private _canSubmit = false;
  private _job: RunAsJobResult | null = null;
}

interface IFormViewProps extends IRunAsJobOptions {
  idempotencyToken: string;
  bindSubmit: (submit: () => Promise<RunAsJobResult | null>) => void;
  onCanSubmitChange: (canSubmit: boolean) => void;
  onRepeatChange: (repeat: boolean) => void;
}

function RunAsJobFormView(props: IFormViewProps): JSX.Element {
  const { api, path, config, trans, rerun } = props;
  const features = featuresOf(config);
  const [name, setName] = React.useState(() =>
    rerun
      ? rerunName(rerun.name, props.takenNames ?? [])
      : defaultJobName(path, new Date())
  );
  const { list: flavorList, retry: retryFlavors } = useFlavorList(api);
  // The user's pick; until they pick, the server's default flavor is selected (a
  // rerun's, the earlier job's flavor while it is offered).
  const [pickedId, setPickedId] = React.useState<string | null>(
    rerun?.flavor ?? null
  );
  // The deadline as typed; null until edited, which means the flavor's default.
  const [deadlineText, setDeadlineText] = React.useState<string | null>(
    rerun?.deadline_seconds
      ? String(Math.ceil(rerun.deadline_seconds / 60))
      : null
  );
  const [parameters, setParameters] = React.useState<
    INotebookParameter[] | null
  >(features.parameters ? null : []);
  const [parametersError, setParametersError] = React.useState<string | null>(
    null
  );
  const [texts, setTexts] = React.useState<{ [name: string]: string }>({});
  const [html, setHtml] = React.useState(
    features.html_output &&
      (rerun ? rerun.output_formats.includes('html') : true)
  );
  const [notifyEmail, setNotifyEmail] = React.useState(false);
  // "Repeat on a schedule": the form makes a schedule instead of a one-off job.
  const schedule = useScheduleRepeat();
  const { repeat, form: scheduleForm } = schedule;
  const [submitting, setSubmitting] = React.useState(false);
  const [error, setError] = React.useState<string | null>(null);
  const [problems, setProblems] = React.useState<IFieldProblem[]>([]);
  // A deadline the job cannot take: said next to its box, which is marked and shown.
  const [deadlineError, setDeadlineError] = React.useState<string | null>(null);
  const deadlineInput = React.useRef<HTMLInputElement>(null);
  const errorBox = React.useRef<HTMLDivElement>(null);
  // Whatever went wrong is brought into view: the dialog's body scrolls, its buttons
  // do not, and a message below the fold looks like a Submit that did nothing.
  React.useEffect(() => {
    if (deadlineError) {
      deadlineInput.current?.scrollIntoView?.({ block: 'center' });
      deadlineInput.current?.focus();
    } else if (error) {
      errorBox.current?.scrollIntoView?.({ block: 'nearest' });
    }
  }, [error, deadlineError]);

  React.useEffect(() => {
    if (!features.parameters) {
      return;
    }
    // Aborted when the dialog closes: an answer that comes later is dropped.
    const abandoned = new AbortController();
    // A rerun's parameters are those of the snapshot its job ran, with its values.
    retryTransient(
      () =>
        rerun ? api.getJobParameters(rerun.job_id) : api.getParameters(path),
      undefined,
      abandoned.signal
    ).then(
      list => {
        if (abandoned.signal.aborted) {
          return;
        }
        const initial: { [name: string]: string } = {};
        for (const parameter of list) {
          initial[parameter.name] = editableText(parameter);
        }
        setTexts(rerun ? rerunTexts(list, rerun.parameters) : initial);
        setParameters(list);
      },
      reason => {
        if (!abandoned.signal.aborted) {
          setParameters([]);
          setParametersError(errorSentence(reason));
        }
      }
    );
    return () => abandoned.abort();
  }, [api, path]);

  const flavors = flavorList.status === 'loaded' ? flavorList.flavors : null;
  const offered = flavors ? availableFlavors(flavors) : [];
  const closed = flavors ? flavors.filter(flavor => !flavor.available) : [];
  const flavor =
    offered.find(item => item.id === pickedId) ??
    (flavors ? defaultFlavor(flavors) : null);
  const deadline =
    deadlineText ?? (flavor ? String(deadlineMinutes(flavor).initial) : '');
  const canSubmit = flavor !== null && parameters !== null && !submitting;

  React.useEffect(() => {
    props.onCanSubmitChange(canSubmit);
  }, [canSubmit]);

  const pickFlavor = (picked: IJobFlavorInfo) => {
    setPickedId(picked.id);
    const { max } = deadlineMinutes(picked);
    if (deadlineText !== null && Number(deadlineText) > max) {
      setDeadlineText(String(max));
    }
  };

  const submit = async (): Promise<RunAsJobResult | null> => {
    if (flavorList.status === 'loading' || parameters === null) {
      setError(
        trans.__(
          'The flavors and parameters are still loading; submit again in a moment.'
        )
      );
      return null;
    }
    if (flavorList.status === 'failed') {
      setError(
        trans.__(
          'The flavors could not be listed, so the job cannot be submitted yet. Press Retry under Flavor.'
        )
      );
      return null;
    }
    if (flavorList.flavors.length === 0) {
      setError(
        trans.__(
          'No job flavor is set up here, so notebooks cannot run as jobs. Ask the hub admins to add one.'
        )
      );
      return null;
    }
    if (offered.length === 0) {
      setError(
        trans.__(
          'No job flavor is open to you right now, so the job cannot start. %1',
          closed.map(item => `${item.title}: ${item.reason}`).join(' ')
        )
      );
      return null;
    }
    if (flavor === null) {
      setError(trans.__('Pick a flavor for the job.'));
      return null;
    }
    if (features.deadline) {
      const problem = deadlineProblem(deadline, flavor);
      setDeadlineError(problem);
      if (problem) {
        setError(null);
        return null;
      }
    }
    const changed = changedParameters(parameters, texts);
    if (Object.keys(changed.problems).length > 0) {
      setError(
        trans.__('Some parameters cannot be read; correct the marked boxes.')
      );
      return null;
    }
    // A rerun keeps the values its job passed to names the snapshot does not declare.
    const kept: { [name: string]: JsonValue } = {};
    for (const [key, value] of Object.entries(rerun?.parameters ?? {})) {
      if (!parameters.some(parameter => parameter.name === key)) {
        kept[key] = value;
      }
    }
    const jobRequest = createRequest({
      inputPath: path,
      name,
      flavor: flavor.id,
      parameters: { ...kept, ...changed.values },
      deadlineMinutes: features.deadline ? Number(deadline) : null,
      html: features.html_output && html,
      idempotencyToken: props.idempotencyToken,
      notifyEmail: features.notify_email && notifyEmail,
      rerunOf: rerun ?? null
    });
    return submitRepeatable({
      api,
      schedule,
      scheduled: repeat ? scheduleRequest(jobRequest, scheduleForm) : null,
      create: () => api.createJob(jobRequest),
      say: setError,
      setProblems,
      setBusy: setSubmitting,
      trans
    });
  };
  // The dialog's Submit button calls the latest submit (with the latest state); an
  // error it did not expect still ends in a sentence, never in a dialog that hangs.
  const submitRef = React.useRef(submit);
  submitRef.current = submit;
  React.useEffect(() => {
    props.bindSubmit(() =>
      submitRef.current().catch(reason => {
        setSubmitting(false);
        setError(errorSentence(reason));
        return null;
      })
    );
  }, []);

  return (
    <div className="jp-JupyterToJob-form" data-testid="run-as-job-form">
      <p className="jp-JupyterToJob-formNote" data-testid="run-as-job-note">
        {rerun
          ? trans.__(
              'The job runs %1 as “%2” ran it, apart from this server: changes made to the file since then are not in it.',
              path,
              rerun.name
            )
          : trans.__('The job runs %1 as saved, apart from this server.', path)}
      </p>

      <Field label={trans.__('Job name')}>
        <input
          name="job-name"
          data-testid="job-name-input"
          className="jp-mod-styled jp-JupyterToJob-input"
          maxLength={100}
          value={name}
          onChange={event => setName(event.target.value)}
        />
      </Field>

      <FlavorPicker
        list={flavorList}
        selected={flavor}
        onPick={pickFlavor}
        onRetry={retryFlavors}
        trans={trans}
      />

      {features.deadline && flavor && (
        <Field label={trans.__('Deadline (minutes)')}>
          <input
            type="number"
            name="deadline"
            data-testid="deadline-input"
            className="jp-mod-styled jp-JupyterToJob-input jp-JupyterToJob-number"
            min={1}
            max={deadlineMinutes(flavor).max}
            step={1}
            required
            ref={deadlineInput}
            aria-invalid={deadlineError ? true : undefined}
            aria-describedby={
              deadlineError ? 'jp-JupyterToJob-deadlineError' : undefined
            }
            value={deadline}
            onChange={event => {
              setDeadlineText(event.target.value);
              setDeadlineError(null);
            }}
          />
          {deadlineError && (
            <span
              className="jp-JupyterToJob-fieldError"
              id="jp-JupyterToJob-deadlineError"
              role="alert"
              data-testid="deadline-error"
            >
              {deadlineError}
            </span>
          )}
          <span className="jp-JupyterToJob-hint">
            {trans.__(
              'The job is stopped after this long (%1).',
              deadlineHint(flavor)
            )}
          </span>
        </Field>
      )}

      {features.parameters && (
        <ParameterEditor
          parameters={parameters}
          error={parametersError}
          texts={texts}
          onChange={(parameterName, value) =>
            setTexts(current => ({ ...current, [parameterName]: value }))
          }
          trans={trans}
        />
      )}

      {features.html_output && (
        <Checkbox
          testid="html-output-checkbox"
          checked={html}
          onChange={setHtml}
          label={trans.__('Also keep an HTML copy of the executed notebook')}
        />
      )}

      {features.notify_email && (
        <Checkbox
          testid="notify-email-checkbox"
          checked={notifyEmail}
          onChange={setNotifyEmail}
          label={trans.__('Notify me by mail when it ends')}
        />
      )}

      {!rerun && (
        <RepeatOnSchedule
          state={schedule}
          onRepeatChange={props.onRepeatChange}
          trans={trans}
        />
      )}

      {submitting && (
        <Hint testid="run-as-job-submitting">{trans.__('Submitting…')}</Hint>
      )}
      <FormError
        testid="run-as-job-error"
        sentences={error ? [error] : []}
        problems={problems}
        boxRef={errorBox}
      />
    </div>
  );
}
