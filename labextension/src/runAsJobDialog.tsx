import { Dialog, ReactWidget } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { UUID } from '@lumino/coreutils';
import * as React from 'react';

import { featuresOf, JobsAPI } from './api';
import { errorSentence, JobAPIError } from './errors';
import {
  availableFlavors,
  deadlineHint,
  deadlineMinutes,
  deadlineProblem,
  defaultFlavor,
  flavorLoad,
  flavorSummary
} from './flavors';
import {
  IDescribeJob,
  IFieldProblem,
  IJobFlavorInfo,
  IJobServiceConfig,
  INotebookParameter
} from './models';
import { changedParameters, editableText, parameterKind } from './parameters';
import { createRequest, defaultJobName, notebookStem } from './submission';

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
}

/**
 * The Run as Job dialog. Submit sends the job and closes the dialog only when the
 * server has accepted it; otherwise the server's sentence shows in the dialog.
 * Every submit of one dialog carries the same idempotency token, so a double click
 * or a retry after a lost answer starts one job.
 */
export class RunAsJobDialog extends Dialog<IDescribeJob | null> {
  constructor(options: IRunAsJobOptions) {
    const { trans } = options;
    const form = new RunAsJobForm(options);
    const buttons = [
      Dialog.cancelButton({ label: trans.__('Cancel') }),
      Dialog.okButton({
        label: trans.__('Submit'),
        className: 'jp-JupyterToJob-submit'
      })
    ];
    super({
      title: trans.__('Run “%1” as a job', notebookStem(options.path)),
      body: form,
      buttons,
      hasClose: true,
      focusNodeSelector: 'input[name="job-name"]'
    });
    this.addClass('jp-JupyterToJob-dialog');
    this._form = form;
    this._buttonList = buttons;
  }

  /**
   * Resolve with a button: Cancel closes; Submit closes once the job is created.
   */
  resolve(index?: number): void {
    const button = this._buttonList[index ?? this._buttonList.length - 1];
    if (!button?.accept) {
      super.resolve(index);
      return;
    }
    if (this._submitting) {
      return;
    }
    this._submitting = true;
    const submitNode = this.node.querySelector<HTMLButtonElement>(
      '.jp-JupyterToJob-submit'
    );
    if (submitNode) {
      submitNode.disabled = true;
    }
    void this._form.submit().then(job => {
      this._submitting = false;
      if (submitNode) {
        submitNode.disabled = false;
      }
      if (job) {
        super.resolve(index);
      }
    });
  }

  private _form: RunAsJobForm;
  private _buttonList: Dialog.IButton[];
  private _submitting = false;
}

/**
 * The body of the dialog: the form, and the job once the server accepted it.
 */
export class RunAsJobForm extends ReactWidget {
  constructor(options: IRunAsJobOptions) {
    super();
    this.addClass('jp-JupyterToJob-formBody');
    this._options = options;
  }

  /**
   * Validate and send the form.
   *
   * @returns The new job; null when the form or the server refused (the form
   * says why).
   */
  submit(): Promise<IDescribeJob | null> {
    if (!this._submit) {
      return Promise.resolve(null);
    }
    return this._submit().then(job => {
      this._job = job ?? this._job;
      return job;
    });
  }

  /**
   * The job created (what the dialog resolves with).
   */
  getValue(): IDescribeJob | null {
    return this._job;
  }

  protected render(): JSX.Element {
    return (
      <RunAsJobFormView
        {...this._options}
        idempotencyToken={this._token}
        bindSubmit={submit => {
          this._submit = submit;
        }}
      />
    );
  }

  private _options: IRunAsJobOptions;
  private readonly _token = UUID.uuid4();
  private _submit: (() => Promise<IDescribeJob | null>) | null = null;
  private _job: IDescribeJob | null = null;
}

interface IFormViewProps extends IRunAsJobOptions {
  idempotencyToken: string;
  bindSubmit: (submit: () => Promise<IDescribeJob | null>) => void;
}

function RunAsJobFormView(props: IFormViewProps): JSX.Element {
  const { api, path, config, trans } = props;
  const features = featuresOf(config);
  const [name, setName] = React.useState(() =>
    defaultJobName(path, new Date())
  );
  const [flavors, setFlavors] = React.useState<IJobFlavorInfo[] | null>(null);
  const [flavorsError, setFlavorsError] = React.useState<string | null>(null);
  const [flavorId, setFlavorId] = React.useState<string | null>(null);
  const [deadline, setDeadline] = React.useState('');
  const [deadlineEdited, setDeadlineEdited] = React.useState(false);
  const [parameters, setParameters] = React.useState<
    INotebookParameter[] | null
  >(null);
  const [parametersError, setParametersError] = React.useState<string | null>(
    null
  );
  const [texts, setTexts] = React.useState<{ [name: string]: string }>({});
  const [html, setHtml] = React.useState(features.html_output);
  const [submitting, setSubmitting] = React.useState(false);
  const [error, setError] = React.useState<string | null>(null);
  const [problems, setProblems] = React.useState<IFieldProblem[]>([]);

  React.useEffect(() => {
    let alive = true;
    api.listFlavors().then(
      list => {
        if (!alive) {
          return;
        }
        setFlavors(list);
        const preselected = defaultFlavor(list);
        setFlavorId(preselected?.id ?? null);
        if (preselected) {
          setDeadline(String(deadlineMinutes(preselected).initial));
        }
      },
      reason => {
        if (alive) {
          setFlavors([]);
          setFlavorsError(errorSentence(reason));
        }
      }
    );
    if (features.parameters) {
      api.getParameters(path).then(
        list => {
          if (!alive) {
            return;
          }
          const initial: { [name: string]: string } = {};
          for (const parameter of list) {
            initial[parameter.name] = editableText(parameter);
          }
          setTexts(initial);
          setParameters(list);
        },
        reason => {
          if (alive) {
            setParameters([]);
            setParametersError(errorSentence(reason));
          }
        }
      );
    } else {
      setParameters([]);
    }
    return () => {
      alive = false;
    };
  }, [api, path]);

  const offered = flavors ? availableFlavors(flavors) : [];
  const closed = flavors ? flavors.filter(flavor => !flavor.available) : [];
  const flavor = offered.find(item => item.id === flavorId) ?? null;
  const parameterProblems = changedParameters(parameters ?? [], texts).problems;

  const pickFlavor = (picked: IJobFlavorInfo) => {
    setFlavorId(picked.id);
    const { initial, max } = deadlineMinutes(picked);
    if (!deadlineEdited) {
      setDeadline(String(initial));
    } else if (Number(deadline) > max) {
      setDeadline(String(max));
    }
  };

  const submit = async (): Promise<IDescribeJob | null> => {
    if (flavors === null || parameters === null) {
      setError(
        trans.__(
          'The flavors and parameters are still loading; submit again in a moment.'
        )
      );
      return null;
    }
    if (flavors.length > 0 && offered.length === 0) {
      setError(
        trans.__(
          'No job flavor is open to you right now, so the job cannot start. %1',
          closed.map(item => `${item.title}: ${item.reason}`).join(' ')
        )
      );
      return null;
    }
    if (offered.length > 0 && flavor === null) {
      setError(trans.__('Pick a flavor for the job.'));
      return null;
    }
    if (flavor && features.deadline) {
      const problem = deadlineProblem(deadline, flavor);
      if (problem) {
        setError(problem);
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
    setSubmitting(true);
    setError(null);
    setProblems([]);
    try {
      return await api.createJob(
        createRequest({
          inputPath: path,
          name,
          flavor: flavor?.id ?? null,
          parameters: changed.values,
          deadlineMinutes:
            flavor && features.deadline ? Number(deadline) : null,
          html: features.html_output && html,
          idempotencyToken: props.idempotencyToken
        })
      );
    } catch (reason) {
      setError(errorSentence(reason));
      setProblems(reason instanceof JobAPIError ? reason.problems : []);
      return null;
    } finally {
      setSubmitting(false);
    }
  };
  // The dialog's Submit button calls the latest submit (with the latest state).
  const submitRef = React.useRef(submit);
  submitRef.current = submit;
  React.useEffect(() => {
    props.bindSubmit(() => submitRef.current());
  }, []);

  return (
    <div className="jp-JupyterToJob-form" data-testid="run-as-job-form">
      <p className="jp-JupyterToJob-formNote">
        {trans.__('The job runs %1 as saved, apart from this server.', path)}
      </p>

      <label className="jp-JupyterToJob-field">
        <span className="jp-JupyterToJob-fieldLabel">
          {trans.__('Job name')}
        </span>
        <input
          name="job-name"
          data-testid="job-name-input"
          className="jp-mod-styled jp-JupyterToJob-input"
          maxLength={100}
          value={name}
          onChange={event => setName(event.target.value)}
        />
      </label>

      <fieldset className="jp-JupyterToJob-flavors" data-testid="flavor-picker">
        <legend className="jp-JupyterToJob-fieldLabel">
          {trans.__('Flavor')}
        </legend>
        {flavors === null && (
          <p className="jp-JupyterToJob-hint">
            {trans.__('Loading the flavors…')}
          </p>
        )}
        {flavorsError && (
          <p className="jp-JupyterToJob-hint">
            {trans.__(
              'The flavors could not be listed (%1) The job will use the default flavor.',
              flavorsError
            )}
          </p>
        )}
        {offered.map(item => (
          <label
            key={item.id}
            className={
              'jp-JupyterToJob-flavor' +
              (item.id === flavorId ? ' jp-mod-selected' : '')
            }
            data-testid="flavor-option"
            data-flavor-id={item.id}
          >
            <input
              type="radio"
              name="flavor"
              value={item.id}
              checked={item.id === flavorId}
              onChange={() => pickFlavor(item)}
            />
            <span className="jp-JupyterToJob-flavorText">
              <span className="jp-JupyterToJob-flavorTitle">{item.title}</span>
              <span className="jp-JupyterToJob-flavorSummary">
                {flavorSummary(item)}
              </span>
              <span className="jp-JupyterToJob-flavorLoad">
                {flavorLoad(item)}
              </span>
              {item.description && (
                <span className="jp-JupyterToJob-hint">{item.description}</span>
              )}
            </span>
          </label>
        ))}
        {flavors !== null && flavors.length > 0 && offered.length === 0 && (
          <p className="jp-JupyterToJob-hint">
            {trans.__('No job flavor is open to you right now.')}
          </p>
        )}
        {closed.length > 0 && (
          <p
            className="jp-JupyterToJob-hint"
            title={closed
              .map(item => `${item.title}: ${item.reason}`)
              .join('\n')}
          >
            {trans._n(
              '%1 more flavor is not open to you: %2',
              '%1 more flavors are not open to you: %2',
              closed.length,
              closed.map(item => item.title).join(', ')
            )}
          </p>
        )}
      </fieldset>

      {features.deadline && flavor && (
        <label className="jp-JupyterToJob-field">
          <span className="jp-JupyterToJob-fieldLabel">
            {trans.__('Deadline (minutes)')}
          </span>
          <input
            type="number"
            name="deadline"
            data-testid="deadline-input"
            className="jp-mod-styled jp-JupyterToJob-input jp-JupyterToJob-number"
            min={1}
            max={deadlineMinutes(flavor).max}
            step={1}
            required
            value={deadline}
            onChange={event => {
              setDeadline(event.target.value);
              setDeadlineEdited(true);
            }}
          />
          <span className="jp-JupyterToJob-hint">
            {trans.__(
              'The job is stopped after this long (%1).',
              deadlineHint(flavor)
            )}
          </span>
        </label>
      )}

      {features.parameters && (
        <fieldset
          className="jp-JupyterToJob-parameters"
          data-testid="parameters"
        >
          <legend className="jp-JupyterToJob-fieldLabel">
            {trans.__('Parameters')}
          </legend>
          {parameters === null && (
            <p className="jp-JupyterToJob-hint">
              {trans.__('Reading the notebook’s parameters…')}
            </p>
          )}
          {parametersError && (
            <p className="jp-JupyterToJob-hint">{parametersError}</p>
          )}
          {parameters !== null &&
            parameters.length === 0 &&
            !parametersError && (
              <p className="jp-JupyterToJob-hint">
                {trans.__(
                  'This notebook has no cell tagged “parameters”. Tag one (Property Inspector → Cell Tags) to change its values per job.'
                )}
              </p>
            )}
          {(parameters ?? []).map(parameter => {
            const kind = parameterKind(parameter);
            const problem = parameterProblems[parameter.name];
            return (
              <label
                key={parameter.name}
                className="jp-JupyterToJob-parameter"
                title={parameter.help || undefined}
              >
                <span className="jp-JupyterToJob-parameterName">
                  {parameter.name}
                </span>
                <input
                  className={
                    'jp-mod-styled jp-JupyterToJob-input' +
                    (problem ? ' jp-mod-error' : '')
                  }
                  data-testid="parameter-input"
                  data-parameter={parameter.name}
                  value={texts[parameter.name] ?? ''}
                  onChange={event => {
                    const value = event.target.value;
                    setTexts(current => ({
                      ...current,
                      [parameter.name]: value
                    }));
                  }}
                />
                <span className="jp-JupyterToJob-parameterKind">{kind}</span>
                {problem && (
                  <span className="jp-JupyterToJob-fieldError">{problem}</span>
                )}
              </label>
            );
          })}
        </fieldset>
      )}

      {features.html_output && (
        <label className="jp-JupyterToJob-checkbox">
          <input
            type="checkbox"
            data-testid="html-output-checkbox"
            checked={html}
            onChange={event => setHtml(event.target.checked)}
          />
          {trans.__('Also keep an HTML copy of the executed notebook')}
        </label>
      )}

      {submitting && (
        <p className="jp-JupyterToJob-hint" data-testid="run-as-job-submitting">
          {trans.__('Submitting…')}
        </p>
      )}
      {error && (
        <div
          className="jp-JupyterToJob-formError"
          role="alert"
          data-testid="run-as-job-error"
        >
          <p>{error}</p>
          {problems.length > 0 && (
            <ul>
              {problems.map(problem => (
                <li key={problem.field}>
                  <code>{problem.field}</code>: {problem.message}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </div>
  );
}
