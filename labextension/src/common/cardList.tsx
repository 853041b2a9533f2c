/**
 * What the Pipelines and Schedules tabs share: a list of cards under a toolbar
 * with Refresh and a count, the sentences of a failed refresh or action, the
 * loading and empty hints, and a card's header buttons and highlighting.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { classes } from '@jupyterlab/ui-components';
import * as React from 'react';

import { PollingModel } from './pollingModel';
import { TextButton } from './textButton';
import { EmptyHint, Hint } from './hint';

export interface ICardListProps {
  model: Pick<PollingModel, 'loaded' | 'message' | 'actionError' | 'refresh'>;
  /**
   * What one card is ("pipeline", "schedule"): it names the list's class and
   * test ids ("pipelines-count", "pipeline-action-error"...).
   */
  kind: string;
  /**
   * How many cards the list holds, in words ("2 pipelines").
   */
  countText: string;
  /**
   * The hint until the first refresh has answered.
   */
  loadingText: string;
  /**
   * The sentence shown when the list is loaded and holds nothing.
   */
  emptyText: string;
  /**
   * The list's accessible name.
   */
  label: string;
  empty: boolean;
  trans: TranslationBundle;
  /**
   * Buttons before Refresh in the toolbar.
   */
  toolbar?: React.ReactNode;
  children: React.ReactNode;
}

/**
 * A tab's list of cards with its toolbar and sentences.
 */
export function CardList(props: ICardListProps): JSX.Element {
  const { model, kind, trans } = props;
  return (
    <div className={`jp-JupyterToJob-${kind}s`} data-testid={`${kind}s`}>
      <div className="jp-JupyterToJob-toolbar">
        {props.toolbar}
        <TextButton
          testid={`${kind}s-refresh`}
          onClick={() => void model.refresh()}
        >
          {trans.__('Refresh')}
        </TextButton>
        <span className="jp-JupyterToJob-count" data-testid={`${kind}s-count`}>
          {model.loaded && !model.message ? props.countText : ''}
        </span>
      </div>
      {model.message && (
        <div
          className="jp-JupyterToJob-message"
          role="alert"
          data-testid={`${kind}s-message`}
        >
          {model.message}
        </div>
      )}
      {model.actionError && (
        <div
          className="jp-JupyterToJob-message"
          role="alert"
          data-testid={`${kind}-action-error`}
        >
          {model.actionError}
        </div>
      )}
      {!model.loaded && <Hint>{props.loadingText}</Hint>}
      {model.loaded && !model.message && props.empty && (
        <EmptyHint testid={`${kind}s-empty`}>{props.emptyText}</EmptyHint>
      )}
      <ul className="jp-JupyterToJob-cards" aria-label={props.label}>
        {props.children}
      </ul>
    </div>
  );
}

/**
 * A card of the list: marked and scrolled into view while highlighted.
 */
export function Card(
  props: {
    highlighted: boolean;
    label: string;
    children: React.ReactNode;
  } & Record<`data-${string}`, string>
): JSX.Element {
  const { highlighted, label, children, ...data } = props;
  const ref = React.useRef<HTMLLIElement>(null);
  React.useEffect(() => {
    if (highlighted) {
      ref.current?.scrollIntoView?.({ block: 'nearest' });
    }
  }, [highlighted]);
  return (
    <li
      ref={ref}
      className={classes(
        'jp-JupyterToJob-card',
        highlighted && 'jp-mod-selected'
      )}
      {...data}
      aria-label={label}
    >
      {children}
    </li>
  );
}

/**
 * A card's header: its title, its status badge and its action buttons.
 */
export function CardHeader(props: {
  title: string;
  badge: React.ReactNode;
  children: React.ReactNode;
}): JSX.Element {
  return (
    <header className="jp-JupyterToJob-cardHeader">
      <h3 className="jp-JupyterToJob-cardTitle">{props.title}</h3>
      {props.badge}
      <div className="jp-JupyterToJob-actions">{props.children}</div>
    </header>
  );
}

/**
 * A button in a card's header ("Pause", "Delete"...), named for its card.
 */
export function CardAction(props: {
  testid: string;
  label: string;
  disabled: boolean;
  onClick: () => void;
  variant?: 'warn' | 'danger';
  children: React.ReactNode;
}): JSX.Element {
  return (
    <TextButton
      className={props.variant && `jp-JupyterToJob-${props.variant}`}
      testid={props.testid}
      aria-label={props.label}
      disabled={props.disabled}
      onClick={props.onClick}
    >
      {props.children}
    </TextButton>
  );
}
