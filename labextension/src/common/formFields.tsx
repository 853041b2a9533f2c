/**
 * The labelled controls the Run as Job, pipeline, schedule and notification forms
 * share: a field with its label above the input, and a checkbox with its words.
 */
import * as React from 'react';

/**
 * A form field: its label above the input (and any hint or problem) it holds.
 */
export function Field(props: {
  label: string;
  children: React.ReactNode;
}): JSX.Element {
  return (
    <label className="jp-JupyterToJob-field">
      <span className="jp-JupyterToJob-fieldLabel">{props.label}</span>
      {props.children}
    </label>
  );
}

/**
 * A checkbox followed by its words; `onChange` is told whether it is now ticked.
 * `inputProps` go to the box itself (aria-invalid, for one).
 */
export function Checkbox(props: {
  testid: string;
  checked: boolean;
  onChange: (checked: boolean) => void;
  label: string;
  inputProps?: React.InputHTMLAttributes<HTMLInputElement>;
}): JSX.Element {
  return (
    <label className="jp-JupyterToJob-checkbox">
      <input
        type="checkbox"
        data-testid={props.testid}
        checked={props.checked}
        onChange={event => props.onChange(event.target.checked)}
        {...props.inputProps}
      />
      {props.label}
    </label>
  );
}

/**
 * A group of fields under its legend (Schedule, Parameters, Flavor); other
 * attributes (`className`, `data-*`, `aria-*`) go to the fieldset.
 */
export function FieldGroup(
  props: React.FieldsetHTMLAttributes<HTMLFieldSetElement> & {
    testid: string;
    legend: string;
  }
): JSX.Element {
  const { testid, legend, children, ...attributes } = props;
  return (
    <fieldset data-testid={testid} {...attributes}>
      <legend className="jp-JupyterToJob-fieldLabel">{legend}</legend>
      {children}
    </fieldset>
  );
}
