/**
 * The short sentences the forms and lists show in place of what is not there (yet):
 * something loading or under way, what to do first, a list that holds nothing.
 */
import * as React from 'react';

/**
 * What a hint shows, and its test id.
 */
export interface IHintProps {
  testid?: string;
  children: React.ReactNode;
}

/**
 * A hint: something is loading or under way, or what to do first.
 */
export function Hint(props: IHintProps): JSX.Element {
  return (
    <p className="jp-JupyterToJob-hint" data-testid={props.testid}>
      {props.children}
    </p>
  );
}

/**
 * The sentence of a list that holds nothing (or nothing that matches).
 */
export function EmptyHint(props: IHintProps): JSX.Element {
  return (
    <p className="jp-JupyterToJob-empty" data-testid={props.testid}>
      {props.children}
    </p>
  );
}
