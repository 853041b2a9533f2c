/**
 * The lab's plain button with words on it (Refresh, Retry, Next), as
 * @jupyterlab/ui-components' Button with the extension's look.
 */
import { Button, classes, IButtonProps } from '@jupyterlab/ui-components';
import * as React from 'react';

/**
 * A button that sends no form (`type="button"`), with class
 * `jp-JupyterToJob-button` and any `className` beside it, and its `data-testid`.
 */
export function TextButton(
  props: Omit<IButtonProps, 'type'> & { testid: string }
): JSX.Element {
  const { testid, className, ...button } = props;
  return (
    <Button
      type="button"
      className={classes('jp-JupyterToJob-button', className)}
      data-testid={testid}
      {...button}
    />
  );
}
