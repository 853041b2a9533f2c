/**
 * The Flavor group of the Run as Job dialog: the flavor list while it loads, when it
 * could not be listed (with Retry), and the flavors to pick from once it came.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { classes } from '@jupyterlab/ui-components';
import * as React from 'react';

import { JobsAPI } from '../common/api';
import { errorSentence } from '../common/errors';
import { FieldGroup } from '../common/formFields';
import { tellPattern } from '../common/format';
import { availableFlavors, flavorLoad, flavorSummary } from './flavors';
import { IJobFlavorInfo } from '../common/models';
import { retryTransient } from '../common/retry';
import { TextButton } from '../common/textButton';
import { Hint } from '../common/hint';

/**
 * The flavor list of one dialog: still loading, not listed (with the sentence to
 * show), or listed.
 */
export type FlavorList =
  | { status: 'loading' }
  | { status: 'failed'; message: string }
  | { status: 'loaded'; flavors: IJobFlavorInfo[] };

/**
 * The flavor list, requested when the dialog opens; transient failures are retried
 * by themselves, others wait for the user's Retry.
 *
 * @returns The list, and `retry` to request it again.
 */
export function useFlavorList(api: JobsAPI): {
  list: FlavorList;
  retry: () => void;
} {
  const [list, setList] = React.useState<FlavorList>({ status: 'loading' });
  const [request, setRequest] = React.useState(0);
  React.useEffect(() => {
    // Aborted when the dialog closes or Retry sends a newer request: a late answer
    // must not replace a newer one.
    const abandoned = new AbortController();
    setList({ status: 'loading' });
    retryTransient(() => api.listFlavors(), undefined, abandoned.signal).then(
      flavors => {
        if (!abandoned.signal.aborted) {
          setList({ status: 'loaded', flavors });
        }
      },
      reason => {
        if (!abandoned.signal.aborted) {
          setList({ status: 'failed', message: errorSentence(reason) });
        }
      }
    );
    return () => abandoned.abort();
  }, [api, request]);
  const retry = React.useCallback(() => setRequest(count => count + 1), []);
  return { list, retry };
}

/**
 * What the Flavor group shows.
 */
export interface IFlavorPickerProps {
  list: FlavorList;
  /**
   * The flavor the job gets (picked, or preselected); null when none is open.
   */
  selected: IJobFlavorInfo | null;
  onPick: (flavor: IJobFlavorInfo) => void;
  onRetry: () => void;
  trans: TranslationBundle;
}

/**
 * The Flavor group: never empty, it says what is going on when there is nothing to pick.
 */
export function FlavorPicker(props: IFlavorPickerProps): JSX.Element {
  const { list, selected, onPick, onRetry, trans } = props;
  const flavors = list.status === 'loaded' ? list.flavors : [];
  const offered = availableFlavors(flavors);
  const closed = flavors.filter(flavor => !flavor.available);
  return (
    <FieldGroup
      className="jp-JupyterToJob-flavors"
      testid="flavor-picker"
      data-state={list.status}
      aria-busy={list.status === 'loading'}
      legend={trans.__('Flavor')}
    >
      {list.status === 'loading' && (
        <Hint testid="flavors-loading">{trans.__('Loading the flavors…')}</Hint>
      )}
      {list.status === 'failed' && (
        <div
          className="jp-JupyterToJob-formError jp-JupyterToJob-flavorsError"
          role="alert"
          data-testid="flavors-error"
        >
          <p>
            {trans.__(
              'The flavors could not be listed, so the job cannot be submitted yet. %1',
              list.message
            )}
          </p>
          <TextButton testid="flavors-retry" onClick={onRetry}>
            {trans.__('Retry')}
          </TextButton>
        </div>
      )}
      {list.status === 'loaded' && flavors.length === 0 && (
        <Hint testid="flavors-none">
          {trans.__(
            'No job flavor is set up here, so notebooks cannot run as jobs. Ask the hub admins to add one.'
          )}
        </Hint>
      )}
      {offered.map(item => (
        <label
          key={item.id}
          className={classes(
            'jp-JupyterToJob-flavor',
            item.id === selected?.id && 'jp-mod-selected'
          )}
          data-testid="flavor-option"
          data-flavor-id={item.id}
        >
          <input
            type="radio"
            name="flavor"
            value={item.id}
            checked={item.id === selected?.id}
            onChange={() => onPick(item)}
          />
          <span className="jp-JupyterToJob-flavorText">
            <span className="jp-JupyterToJob-flavorTitle">{item.title}</span>
            <span className="jp-JupyterToJob-flavorSummary">
              {flavorSummary(item)}
            </span>
            <span className="jp-JupyterToJob-flavorLoad">
              {flavorLoad(item)}
            </span>
            {item.forecast && (
              <span
                className={classes(
                  'jp-JupyterToJob-flavorForecast',
                  item.starts_now === false && 'jp-mod-waits'
                )}
                data-testid="flavor-forecast"
                data-starts-now={item.starts_now ? 'true' : 'false'}
              >
                {item.forecast}
              </span>
            )}
            {item.budget && (
              <span
                className={classes(
                  'jp-JupyterToJob-flavorBudget',
                  item.budget_exhausted && 'jp-mod-exhausted'
                )}
                data-testid="flavor-budget"
                data-exhausted={item.budget_exhausted ? 'true' : 'false'}
                title={
                  item.budget_pattern && item.budget_moments.length > 0
                    ? trans.__("%1, the course's time", item.budget)
                    : undefined
                }
              >
                {item.budget_pattern
                  ? tellPattern(item.budget_pattern, item.budget_moments)
                  : item.budget}
              </span>
            )}
            {item.description && (
              <span className="jp-JupyterToJob-hint">{item.description}</span>
            )}
          </span>
        </label>
      ))}
      {flavors.length > 0 && offered.length === 0 && (
        <Hint>{trans.__('No job flavor is open to you right now.')}</Hint>
      )}
      {closed.length > 0 && (
        <p
          className="jp-JupyterToJob-hint"
          title={closed.map(item => `${item.title}: ${item.reason}`).join('\n')}
        >
          {trans._n(
            '%1 more flavor is not open to you: %2',
            '%1 more flavors are not open to you: %2',
            closed.length,
            closed.map(item => item.title).join(', ')
          )}
        </p>
      )}
    </FieldGroup>
  );
}
