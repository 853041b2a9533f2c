/**
 * Elements that are not buttons but act as one (a job's row, a sidebar item, the
 * status bar's GPU item): they take the focus, and a click, Enter or Space acts.
 */
import * as React from 'react';

/**
 * Whether `event` is a key that presses a button: Enter or Space.
 */
export function isPressKey(event: { key: string }): boolean {
  return event.key === 'Enter' || event.key === ' ';
}

/**
 * The props that make an element act as a button that does `act`.
 */
export function pressable(
  act: () => void
): Pick<
  React.HTMLAttributes<HTMLElement>,
  'tabIndex' | 'onClick' | 'onKeyDown'
> {
  return {
    tabIndex: 0,
    onClick: () => act(),
    onKeyDown: event => {
      if (isPressKey(event)) {
        event.preventDefault();
        act();
      }
    }
  };
}
