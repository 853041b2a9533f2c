/**
 * The error box at the foot of the Run as Job, pipeline builder and pipeline template
 * dialogs: the server's sentences and, below, each field it refused with why.
 */
import * as React from 'react';

import { IFieldProblem } from './models';

export interface IFormErrorProps {
  testid: string;
  /**
   * What went wrong, a paragraph each; none: no box.
   */
  sentences: readonly string[];
  problems?: readonly IFieldProblem[];
  /**
   * The box, for a dialog that scrolls it into view.
   */
  boxRef?: React.Ref<HTMLDivElement>;
}

export function FormError(props: IFormErrorProps): JSX.Element | null {
  const { sentences, problems = [] } = props;
  if (sentences.length === 0) {
    return null;
  }
  return (
    <div
      className="jp-JupyterToJob-formError"
      role="alert"
      data-testid={props.testid}
      ref={props.boxRef}
    >
      {sentences.map(sentence => (
        <p key={sentence}>{sentence}</p>
      ))}
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
  );
}

/**
 * A request's problems split into those shown at a form field (`fieldOf` names the field
 * of a problem, or null), the messages of one field joined, and the rest.
 */
export function problemsByField<F extends string>(
  problems: readonly IFieldProblem[],
  fieldOf: (path: string) => F | null
): { byField: { [field in F]?: string }; rest: IFieldProblem[] } {
  const byField: { [field in F]?: string } = {};
  const rest: IFieldProblem[] = [];
  for (const problem of problems) {
    const field = fieldOf(problem.field);
    if (field) {
      const earlier = byField[field];
      byField[field] = earlier
        ? `${earlier} ${problem.message}`
        : problem.message;
    } else {
      rest.push(problem);
    }
  }
  return { byField, rest };
}
