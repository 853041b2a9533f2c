/**
 * "Run notebooks as a pipeline…": the open notebooks arranged into stages (several
 * in a stage run in parallel), a flavor and parameters per job, pipeline-wide
 * parameters; then Run, or Save as Template (a `.pipeline.yaml` file beside them).
 */
import { Dialog } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { Button, classes } from '@jupyterlab/ui-components';
import * as React from 'react';

import { JobsAPI } from '../common/api';
import { errorSentence, JobAPIError } from '../common/errors';
import { FlavorPicker, useFlavorList } from '../runAsJob/flavorPicker';
import { availableFlavors, defaultFlavor } from '../runAsJob/flavors';
import { FormBody, FormDialog } from '../common/formDialog';
import { FormError } from '../common/formError';
import { Checkbox, Field, FieldGroup } from '../common/formFields';
import {
  IFieldProblem,
  IJobFeatures,
  INotebookParameter
} from '../common/models';
import { ParameterEditor } from '../runAsJob/parameterEditor';
import { defaultTexts } from './pipelineDraft';
import {
  defaultTemplatePath,
  findJob,
  IDraftParameter,
  initialDraft,
  IPipelineDraft,
  MAX_STAGES,
  moveNotebook,
  moveToNewStage,
  pipelineRequest,
  renameStage,
  stageOf,
  updateJob
} from './pipelineDraft';
import { IDescribePipeline } from './pipelineModels';
import { retryTransient } from '../common/retry';
import {
  RepeatOnSchedule,
  useScheduleRepeat
} from '../schedules/scheduleFields';
import { ISchedule } from '../schedules/scheduleModels';
import { submitRepeatable } from '../schedules/repeatable';
import { pipelineScheduleRequest } from '../schedules/scheduleRule';
import { Hint } from '../common/hint';

/**
 * What the builder made: a pipeline run now, or a schedule that runs it again and
 * again ("Repeat on a schedule").
 */
export type PipelineBuilderResult = IDescribePipeline | ISchedule;

/**
 * What the builder needs.
 */
export interface IPipelineBuilderOptions {
  api: JobsAPI;
  /**
   * The open notebooks, relative to the server root, in the order they opened.
   */
  notebooks: string[];
  /**
   * What the job back end supports (`api/config`); the finish mail is offered only
   * where it can be sent.
   */
  features?: IJobFeatures | null;
  trans: TranslationBundle;
}

/**
 * The builder dialog: Cancel, Save as Template (stays open), Run (closes on the
 * pipeline the server made).
 */
export class PipelineBuilderDialog extends FormDialog<PipelineBuilderResult | null> {
  constructor(options: IPipelineBuilderOptions) {
    const { trans } = options;
    const body = new PipelineBuilderBody(options);
    super({
      title: trans.__('Run notebooks as a pipeline'),
      body,
      trans,
      submitLabel: trans.__('Run'),
      extraButtons: [
        Dialog.createButton({
          label: trans.__('Save as Template'),
          className: 'jp-JupyterToJob-saveTemplate',
          accept: false,
          actions: ['save-template']
        })
      ],
      focusNodeSelector: 'input[name="pipeline-name"]'
    });
    this.addClass('jp-JupyterToJob-builderDialog');
    this._builder = body;
    body.onRepeatChange = repeat =>
      this.renameSubmit(repeat ? trans.__('Create Schedule') : trans.__('Run'));
  }

  /**
   * Save as Template saves and leaves the dialog open.
   */
  protected handleButton(button: Dialog.IButton): boolean {
    if (button.actions.includes('save-template')) {
      void this._builder.saveTemplate();
      return true;
    }
    return false;
  }

  /**
   * Run closes the dialog once the pipeline (or schedule) is made.
   */
  protected async send(): Promise<boolean> {
    if (this._running) {
      return false;
    }
    this._running = true;
    try {
      return await this._builder.run();
    } finally {
      this._running = false;
    }
  }

  private _builder: PipelineBuilderBody;
  private _running = false;
}

/**
 * The body of the builder dialog.
 */
export class PipelineBuilderBody extends FormBody<
  IPipelineBuilderOptions,
  PipelineBuilderResult | null
> {
  /**
   * Send the pipeline; true once the server made it.
   */
  async run(): Promise<boolean> {
    const made = (await this._bound?.run()) ?? null;
    this._pipeline = made ?? this._pipeline;
    return made !== null;
  }

  /**
   * Save the pipeline as a template file; the dialog stays open.
   */
  async saveTemplate(): Promise<void> {
    await this._bound?.saveTemplate();
  }

  getValue(): PipelineBuilderResult | null {
    return this._pipeline;
  }

  /**
   * Called when "Repeat on a schedule" is ticked or unticked.
   */
  onRepeatChange: ((repeat: boolean) => void) | null = null;

  protected render(): JSX.Element {
    return (
      <PipelineBuilderView
        {...this.options}
        bind={bound => {
          this._bound = bound;
        }}
        onRepeatChange={repeat => this.onRepeatChange?.(repeat)}
      />
    );
  }

  private _bound: IBuilderActions | null = null;
  private _pipeline: PipelineBuilderResult | null = null;
}

interface IBuilderActions {
  run(): Promise<PipelineBuilderResult | null>;
  saveTemplate(): Promise<void>;
}

type ParameterRead = {
  list: INotebookParameter[] | null;
  error: string | null;
};

/**
 * The parameters of each notebook, read once when the builder opens, and a promise
 * that settles once every read has (Run and Save wait for it rather than refuse).
 */
function useNotebookParameters(
  api: JobsAPI,
  paths: readonly string[]
): {
  read: { [path: string]: ParameterRead };
  latest: React.MutableRefObject<{ [path: string]: ParameterRead }>;
  settled: React.MutableRefObject<Promise<unknown>>;
} {
  const [read, setRead] = React.useState<{ [path: string]: ParameterRead }>({});
  const latest = React.useRef(read);
  const settled = React.useRef<Promise<unknown>>(Promise.resolve());
  React.useEffect(() => {
    const abandoned = new AbortController();
    settled.current = Promise.all(
      paths.map(path =>
        retryTransient(
          () => api.getParameters(path),
          undefined,
          abandoned.signal
        )
          .then(
            list => ({ list, error: null }),
            reason => ({ list: [], error: errorSentence(reason) })
          )
          .then(result => {
            if (!abandoned.signal.aborted) {
              latest.current = { ...latest.current, [path]: result };
              setRead(latest.current);
            }
          })
      )
    );
    return () => abandoned.abort();
  }, [api]);
  return { read, latest, settled };
}

/**
 * The select that moves a notebook: to a stage, to a new stage, or out.
 */
function StagePicker(props: {
  draft: IPipelineDraft;
  path: string;
  onMove: (to: number | 'new') => void;
  trans: TranslationBundle;
}): JSX.Element {
  const { draft, path, onMove, trans } = props;
  const at = stageOf(draft, path);
  const name = path.split('/').pop() ?? path;
  return (
    <select
      className="jp-mod-styled jp-JupyterToJob-stagePicker"
      aria-label={trans.__('Stage of %1', name)}
      title={trans.__('Move %1 to another stage, or leave it out', name)}
      data-testid="builder-stage-picker"
      data-path={path}
      value={String(at)}
      onChange={event => {
        const value = event.target.value;
        onMove(value === 'new' ? 'new' : Number(value));
      }}
    >
      {draft.stages.map((stage, index) => (
        <option key={index} value={String(index)}>
          {trans.__('Stage %1: %2', index + 1, stage.name)}
        </option>
      ))}
      {draft.stages.length < MAX_STAGES && (
        <option value="new">{trans.__('A new stage')}</option>
      )}
      <option value="-1">{trans.__('Leave out')}</option>
    </select>
  );
}

function PipelineBuilderView(
  props: IPipelineBuilderOptions & {
    bind: (actions: IBuilderActions) => void;
    onRepeatChange: (repeat: boolean) => void;
  }
): JSX.Element {
  const { api, notebooks, trans } = props;
  const [draft, setDraft] = React.useState(() => initialDraft(notebooks));
  const [selected, setSelected] = React.useState<string | null>(
    notebooks[0] ?? null
  );
  const [templatePath, setTemplatePath] = React.useState<string | null>(null);
  const [overwrite, setOverwrite] = React.useState<string | null>(null);
  const [busy, setBusy] = React.useState<string | null>(null);
  const [error, setError] = React.useState<string[]>([]);
  const [problems, setProblems] = React.useState<IFieldProblem[]>([]);
  const [saved, setSaved] = React.useState<string | null>(null);
  const [notifyEmail, setNotifyEmail] = React.useState(false);
  const schedule = useScheduleRepeat();
  const { repeat, form: scheduleForm } = schedule;
  const { list: flavorList, retry: retryFlavors } = useFlavorList(api);
  const { read, latest, settled } = useNotebookParameters(api, notebooks);
  // What went wrong is brought into view: the body scrolls, the buttons do not.
  const errorBox = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    if (error.length > 0) {
      errorBox.current?.scrollIntoView?.({ block: 'nearest' });
    }
  }, [error]);

  const flavors = flavorList.status === 'loaded' ? flavorList.flavors : null;
  const fallback = flavors ? defaultFlavor(flavors) : null;
  const path = templatePath ?? defaultTemplatePath(draft);
  const job = selected ? findJob(draft, selected) : null;

  const request = async () => {
    await settled.current;
    return pipelineRequest(
      draft,
      notebook => latest.current[notebook]?.list ?? null,
      fallback?.id ?? null
    );
  };

  const failed = (reason: unknown) => {
    setError([errorSentence(reason)]);
    setProblems(reason instanceof JobAPIError ? reason.problems : []);
  };

  const run = async (): Promise<PipelineBuilderResult | null> => {
    const built = await request();
    if (!built.ok) {
      setError(built.problems);
      return null;
    }
    // Told once, when the pipeline ends (not per job); a template holds no notify.
    const pipeline = {
      ...built.request,
      ...(props.features?.notify_email && notifyEmail
        ? { notify: { email: true } }
        : {})
    };
    return submitRepeatable({
      api,
      schedule,
      scheduled: repeat
        ? pipelineScheduleRequest(pipeline, scheduleForm)
        : null,
      create: () => api.createPipeline(pipeline),
      say: sentence => setError(sentence === null ? [] : [sentence]),
      setProblems,
      setBusy: busy =>
        setBusy(
          busy
            ? repeat
              ? trans.__('Creating the schedule…')
              : trans.__('Starting the pipeline…')
            : null
        ),
      trans
    });
  };

  const saveTemplate = async (): Promise<void> => {
    const built = await request();
    if (!built.ok) {
      setError(built.problems);
      return;
    }
    setBusy(trans.__('Saving the template…'));
    setError([]);
    setProblems([]);
    setSaved(null);
    try {
      const answer = await api.savePipelineTemplate(
        path,
        built.request,
        overwrite === path
      );
      setSaved(answer?.path || path);
      setOverwrite(null);
    } catch (reason) {
      if (reason instanceof JobAPIError && reason.status === 409) {
        setOverwrite(path);
        setError([
          trans.__(
            '%1 exists already. Press Save as Template again to replace it, or change the path.',
            path
          )
        ]);
      } else {
        failed(reason);
      }
    } finally {
      setBusy(null);
    }
  };
  const actions = React.useRef<IBuilderActions>({ run, saveTemplate });
  actions.current.run = run;
  actions.current.saveTemplate = saveTemplate;
  React.useEffect(() => {
    props.bind({
      run: () => actions.current.run(),
      saveTemplate: () => actions.current.saveTemplate()
    });
  }, []);

  const move = (notebook: string, to: number | 'new') => {
    setDraft(current =>
      to === 'new'
        ? moveToNewStage(current, notebook)
        : moveNotebook(current, notebook, to)
    );
    setSaved(null);
  };

  const setWide = (rows: IDraftParameter[]) =>
    setDraft(current => ({ ...current, parameters: rows }));

  if (notebooks.length === 0) {
    return (
      <Hint testid="builder-no-notebooks">
        {trans.__(
          'Open the notebooks to chain first: the builder lists the open notebooks.'
        )}
      </Hint>
    );
  }

  return (
    <div
      className="jp-JupyterToJob-form jp-JupyterToJob-builder"
      data-testid="pipeline-builder"
    >
      <p className="jp-JupyterToJob-formNote">
        {trans.__(
          'Stages run one after another; the notebooks of a stage run side by side. When a job fails, the rest stops. Jobs share files through $JUPYTER_TO_JOB_PIPELINE_DIR.'
        )}
      </p>
      <Field label={trans.__('Pipeline name')}>
        <input
          name="pipeline-name"
          data-testid="builder-name"
          className="jp-mod-styled jp-JupyterToJob-input"
          maxLength={255}
          value={draft.name}
          onChange={event => {
            const name = event.target.value;
            setDraft(current => ({ ...current, name }));
          }}
        />
      </Field>

      <ol
        className="jp-JupyterToJob-stages jp-JupyterToJob-builderStages"
        aria-label={trans.__('Stages')}
      >
        {draft.stages.map((stage, index) => (
          <li
            key={index}
            className="jp-JupyterToJob-stage"
            data-testid="builder-stage"
            data-stage-index={index}
          >
            <label className="jp-JupyterToJob-stageHeader">
              <span className="jp-JupyterToJob-stageName">{index + 1}.</span>
              <input
                className="jp-mod-styled jp-JupyterToJob-input"
                aria-label={trans.__('Name of stage %1', index + 1)}
                data-testid="builder-stage-name"
                maxLength={100}
                value={stage.name}
                onChange={event => {
                  const name = event.target.value;
                  setDraft(current => renameStage(current, index, name));
                }}
              />
            </label>
            <ul className="jp-JupyterToJob-stageJobs">
              {stage.jobs.map(item => (
                <li
                  key={item.path}
                  className={classes(
                    'jp-JupyterToJob-stageJob',
                    item.path === selected && 'jp-mod-selected'
                  )}
                  data-testid="builder-job"
                  data-path={item.path}
                >
                  <button
                    type="button"
                    className="jp-JupyterToJob-link"
                    aria-pressed={item.path === selected}
                    data-testid="builder-job-select"
                    title={trans.__(
                      'Set the flavor and parameters of %1',
                      item.path
                    )}
                    onClick={() => setSelected(item.path)}
                  >
                    {item.path.split('/').pop()}
                  </button>
                  <span className="jp-JupyterToJob-hint">
                    {item.flavor
                      ? (flavors?.find(flavor => flavor.id === item.flavor)
                          ?.title ?? item.flavor)
                      : fallback
                        ? trans.__('%1 (default)', fallback.title)
                        : ''}
                  </span>
                  <StagePicker
                    draft={draft}
                    path={item.path}
                    onMove={to => move(item.path, to)}
                    trans={trans}
                  />
                </li>
              ))}
            </ul>
          </li>
        ))}
      </ol>
      {draft.unused.length > 0 && (
        <div className="jp-JupyterToJob-field" data-testid="builder-unused">
          <span className="jp-JupyterToJob-fieldLabel">
            {trans.__('Open notebooks left out')}
          </span>
          <ul className="jp-JupyterToJob-stageJobs">
            {draft.unused.map(notebook => (
              <li
                key={notebook}
                className="jp-JupyterToJob-stageJob"
                data-testid="builder-unused-job"
                data-path={notebook}
              >
                <span>{notebook}</span>
                <StagePicker
                  draft={draft}
                  path={notebook}
                  onMove={to => move(notebook, to)}
                  trans={trans}
                />
              </li>
            ))}
          </ul>
        </div>
      )}

      {job && selected && (
        <FieldGroup
          className="jp-JupyterToJob-schedule"
          testid="builder-job-settings"
          data-path={selected}
          legend={trans.__('Job “%1”', selected)}
        >
          <FlavorPicker
            list={flavorList}
            selected={
              (flavors &&
                availableFlavors(flavors).find(
                  flavor => flavor.id === job.flavor
                )) ||
              fallback
            }
            onPick={flavor =>
              setDraft(current =>
                updateJob(current, selected, { flavor: flavor.id })
              )
            }
            onRetry={retryFlavors}
            trans={trans}
          />
          <ParameterEditor
            parameters={read[selected]?.list ?? null}
            error={read[selected]?.error ?? null}
            texts={{
              ...defaultTexts(read[selected]?.list ?? []),
              ...job.texts
            }}
            onChange={(name, text) =>
              setDraft(current =>
                updateJob(current, selected, {
                  texts: {
                    ...(findJob(current, selected)?.texts ?? {}),
                    [name]: text
                  }
                })
              )
            }
            trans={trans}
          />
        </FieldGroup>
      )}

      <FieldGroup
        className="jp-JupyterToJob-parameters"
        testid="builder-wide-parameters"
        legend={trans.__('Pipeline-wide parameters')}
      >
        <Hint>
          {trans.__(
            'Given to every job, over its own values. A value is read as JSON (3, true, [1, 2]) or else as text.'
          )}
        </Hint>
        <WideParameterRows
          rows={draft.parameters}
          onChange={setWide}
          trans={trans}
        />
      </FieldGroup>

      {props.features?.notify_email && (
        <Checkbox
          testid="notify-email-checkbox"
          checked={notifyEmail}
          onChange={setNotifyEmail}
          label={trans.__('Notify me by mail when the pipeline ends')}
        />
      )}

      <RepeatOnSchedule
        state={schedule}
        onRepeatChange={props.onRepeatChange}
        trans={trans}
      />

      <Field label={trans.__('Template file (for Save as Template)')}>
        <input
          data-testid="builder-template-path"
          className="jp-mod-styled jp-JupyterToJob-input"
          value={path}
          onChange={event => {
            setTemplatePath(event.target.value);
            setSaved(null);
          }}
        />
      </Field>

      {busy && <Hint>{busy}</Hint>}
      {saved && (
        <p
          className="jp-JupyterToJob-hint"
          role="status"
          data-testid="builder-saved"
        >
          {trans.__(
            'Saved as %1. Run it again later from its context menu in the file browser.',
            saved
          )}
        </p>
      )}
      <FormError
        testid="builder-error"
        sentences={error}
        problems={problems}
        boxRef={errorBox}
      />
    </div>
  );
}

/**
 * Rows of name and value, with Add and Remove.
 */
export function WideParameterRows(props: {
  rows: IDraftParameter[];
  onChange: (rows: IDraftParameter[]) => void;
  trans: TranslationBundle;
  /**
   * Names the user may not change (a template's own parameters).
   */
  fixedNames?: boolean;
}): JSX.Element {
  const { rows, onChange, trans, fixedNames } = props;
  const change = (index: number, changes: Partial<IDraftParameter>) =>
    onChange(
      rows.map((row, at) => (at === index ? { ...row, ...changes } : row))
    );
  return (
    <>
      {rows.map((row, index) => (
        <div
          key={index}
          className="jp-JupyterToJob-wideParameter"
          data-testid="wide-parameter"
        >
          <input
            className="jp-mod-styled jp-JupyterToJob-input jp-JupyterToJob-parameterName"
            aria-label={trans.__('Name of parameter %1', index + 1)}
            data-testid="wide-parameter-name"
            readOnly={fixedNames}
            value={row.name}
            onChange={event => change(index, { name: event.target.value })}
          />
          <input
            className="jp-mod-styled jp-JupyterToJob-input"
            aria-label={trans.__('Value of %1', row.name || index + 1)}
            data-testid="wide-parameter-value"
            data-parameter={row.name}
            value={row.value}
            onChange={event => change(index, { value: event.target.value })}
          />
          {!fixedNames && (
            <Button
              type="button"
              className="jp-JupyterToJob-button"
              aria-label={trans.__('Remove %1', row.name || index + 1)}
              onClick={() => onChange(rows.filter((_, at) => at !== index))}
            >
              {trans.__('Remove')}
            </Button>
          )}
        </div>
      ))}
      {!fixedNames && (
        <button
          type="button"
          className="jp-JupyterToJob-button jp-JupyterToJob-addRow"
          data-testid="wide-parameter-add"
          onClick={() => onChange([...rows, { name: '', value: '' }])}
        >
          {trans.__('Add a parameter')}
        </button>
      )}
    </>
  );
}
