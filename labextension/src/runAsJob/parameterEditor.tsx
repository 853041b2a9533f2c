/**
 * The Parameters group of a notebook job: one box per variable of the notebook's
 * cell tagged "parameters", its kind beside it and what cannot be read under it.
 * Used by the Run as Job dialog and, per job, by the pipeline builder.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { classes } from '@jupyterlab/ui-components';
import * as React from 'react';

import { FieldGroup } from '../common/formFields';
import { INotebookParameter } from '../common/models';
import { changedParameters, parameterKind, stringTyped } from './parameters';
import { Hint } from '../common/hint';

/**
 * What the Parameters group shows and changes.
 */
export interface IParameterEditorProps {
  /**
   * The notebook's parameters; null while they are being read.
   */
  parameters: INotebookParameter[] | null;
  /**
   * Why they could not be read; null when they could.
   */
  error: string | null;
  /**
   * What each box holds, by parameter name.
   */
  texts: { [name: string]: string };
  onChange: (name: string, text: string) => void;
  trans: TranslationBundle;
}

/**
 * The Parameters group.
 */
export function ParameterEditor(props: IParameterEditorProps): JSX.Element {
  const { parameters, error, texts, onChange, trans } = props;
  const problems = changedParameters(parameters ?? [], texts).problems;
  return (
    <FieldGroup
      className="jp-JupyterToJob-parameters"
      testid="parameters"
      legend={trans.__('Parameters')}
    >
      {parameters === null && (
        <Hint>{trans.__('Reading the notebook’s parameters…')}</Hint>
      )}
      {error && <Hint>{error}</Hint>}
      {parameters !== null && parameters.length === 0 && !error && (
        <Hint>
          {trans.__(
            'This notebook has no cell tagged “parameters”. Tag one (Property Inspector → Cell Tags) to change its values per job.'
          )}
        </Hint>
      )}
      {(parameters ?? []).map(parameter => {
        const kind = parameterKind(parameter);
        const problem = problems[parameter.name];
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
              className={classes(
                'jp-mod-styled jp-JupyterToJob-input',
                problem && 'jp-mod-error'
              )}
              data-testid="parameter-input"
              data-parameter={parameter.name}
              value={texts[parameter.name] ?? ''}
              onChange={event => onChange(parameter.name, event.target.value)}
            />
            <span className="jp-JupyterToJob-parameterKind">{kind}</span>
            {problem && (
              <span className="jp-JupyterToJob-fieldError">{problem}</span>
            )}
            {!problem && kind === 'str' && (
              <PassedAs text={texts[parameter.name] ?? ''} trans={trans} />
            )}
          </label>
        );
      })}
    </FieldGroup>
  );
}

/**
 * What a str parameter typed in quotes passes ("Passed as run1, without the
 * quotes"): nothing for text passed as typed.
 */
function PassedAs(props: {
  text: string;
  trans: TranslationBundle;
}): JSX.Element | null {
  const passed = stringTyped(props.text);
  if (passed === props.text) {
    return null;
  }
  return (
    <span className="jp-JupyterToJob-hint" data-testid="parameter-passed-as">
      {props.trans.__('Passed as %1, without the quotes', passed)}
    </span>
  );
}
