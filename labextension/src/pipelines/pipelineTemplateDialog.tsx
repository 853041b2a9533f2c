/**
 * "Run pipeline template": a saved `.pipeline.yaml` / `.pipeline.json` run again, its
 * pipeline-wide parameters prefilled to be given new values.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { FieldGroup } from '../common/formFields';

import { JobsAPI } from '../common/api';
import { errorSentence, JobAPIError } from '../common/errors';
import { FormBody, FormDialog } from '../common/formDialog';
import { useFlavorList } from '../runAsJob/flavorPicker';
import { FormError } from '../common/formError';
import { IFieldProblem } from '../common/models';
import { WideParameterRows } from './pipelineBuilder';
import {
  IDraftParameter,
  parameterRows,
  wideParameters
} from './pipelineDraft';
import { ICreatePipeline, IDescribePipeline } from './pipelineModels';
import { Hint } from '../common/hint';

/**
 * What the template dialog needs.
 */
export interface IPipelineTemplateOptions {
  api: JobsAPI;
  /**
   * The template file, relative to the server root.
   */
  path: string;
  trans: TranslationBundle;
}

/**
 * The dialog: Cancel, or Run (closes on the pipeline the server made).
 */
export class PipelineTemplateDialog extends FormDialog<IDescribePipeline | null> {
  constructor(options: IPipelineTemplateOptions) {
    const { trans } = options;
    const body = new PipelineTemplateBody(options);
    super({
      title: trans.__(
        'Run the pipeline “%1”',
        options.path.split('/').pop() ?? options.path
      ),
      body,
      trans,
      submitLabel: trans.__('Run')
    });
    this._template = body;
  }

  /**
   * Run closes the dialog once the pipeline is made.
   */
  protected send(): Promise<boolean> {
    return this._template.run();
  }

  private _template: PipelineTemplateBody;
}

/**
 * The body of the template dialog.
 */
export class PipelineTemplateBody extends FormBody<
  IPipelineTemplateOptions,
  IDescribePipeline | null
> {
  async run(): Promise<boolean> {
    const made = (await this._run?.()) ?? null;
    this._pipeline = made ?? this._pipeline;
    return made !== null;
  }

  getValue(): IDescribePipeline | null {
    return this._pipeline;
  }

  protected render(): JSX.Element {
    return (
      <PipelineTemplateView
        {...this.options}
        bindRun={run => {
          this._run = run;
        }}
      />
    );
  }

  private _run: (() => Promise<IDescribePipeline | null>) | null = null;
  private _pipeline: IDescribePipeline | null = null;
}

function PipelineTemplateView(
  props: IPipelineTemplateOptions & {
    bindRun: (run: () => Promise<IDescribePipeline | null>) => void;
  }
): JSX.Element {
  const { api, path, trans } = props;
  // Flavors by their titles, once listed ("CPU job", not "cpu-job").
  const { list: flavorList } = useFlavorList(api);
  const flavorTitle = (id: string | null | undefined) =>
    (flavorList.status === 'loaded'
      ? flavorList.flavors.find(flavor => flavor.id === id)?.title
      : null) ?? id;
  const [template, setTemplate] = React.useState<ICreatePipeline | null>(null);
  const [rows, setRows] = React.useState<IDraftParameter[]>([]);
  const [loadError, setLoadError] = React.useState<string | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  const [problems, setProblems] = React.useState<IFieldProblem[]>([]);
  const [busy, setBusy] = React.useState(false);

  React.useEffect(() => {
    let abandoned = false;
    api.getPipelineTemplate(path).then(
      read => {
        if (!abandoned) {
          setTemplate(read);
          setRows(parameterRows(read.parameters ?? {}));
        }
      },
      reason => {
        if (!abandoned) {
          setLoadError(errorSentence(reason));
        }
      }
    );
    return () => {
      abandoned = true;
    };
  }, [api, path]);

  const run = async (): Promise<IDescribePipeline | null> => {
    if (!template) {
      setError(
        loadError ??
          trans.__('The template is still being read; run again in a moment.')
      );
      return null;
    }
    setBusy(true);
    setError(null);
    setProblems([]);
    try {
      return await api.createPipeline({
        template_path: path,
        parameters: wideParameters(rows)
      });
    } catch (reason) {
      setError(errorSentence(reason));
      setProblems(reason instanceof JobAPIError ? reason.problems : []);
      return null;
    } finally {
      setBusy(false);
    }
  };
  const runRef = React.useRef(run);
  runRef.current = run;
  React.useEffect(() => props.bindRun(() => runRef.current()), []);

  return (
    <div className="jp-JupyterToJob-form" data-testid="pipeline-template-form">
      {!template && !loadError && <Hint>{trans.__('Reading %1…', path)}</Hint>}
      <FormError
        testid="template-load-error"
        sentences={loadError ? [loadError] : []}
      />
      {template && (
        <>
          <p className="jp-JupyterToJob-formNote">
            {trans.__(
              'Runs “%1” as saved in %2, with the values below.',
              template.name,
              path
            )}
          </p>
          <ol
            className="jp-JupyterToJob-templateStages"
            data-testid="template-stages"
          >
            {template.stages.map((stage, index) => (
              <li key={index}>
                <strong>{stage.name}</strong>
                {': '}
                {stage.jobs
                  .map(job =>
                    [job.input_path, flavorTitle(job.flavor)]
                      .filter(Boolean)
                      .join(' on ')
                  )
                  .join(', ')}
              </li>
            ))}
          </ol>
          <FieldGroup
            className="jp-JupyterToJob-parameters"
            testid="template-parameters"
            legend={trans.__('Pipeline-wide parameters')}
          >
            {rows.length === 0 && (
              <Hint>
                {trans.__(
                  'This template has no pipeline-wide parameters; add one to give every job a value.'
                )}
              </Hint>
            )}
            <WideParameterRows rows={rows} onChange={setRows} trans={trans} />
          </FieldGroup>
        </>
      )}
      {busy && <Hint>{trans.__('Starting the pipeline…')}</Hint>}
      <FormError
        testid="template-error"
        sentences={error ? [error] : []}
        problems={problems}
      />
    </div>
  );
}
