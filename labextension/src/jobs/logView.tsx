/**
 * The job's log in the Jobs panel: only the lines in view are in the page, so a
 * 200,000-line log scrolls as lightly as a short one. It follows the end while the
 * reader is there and stops when they scroll up ("Jump to end" goes back), finds
 * text (next, previous, how many lines), and jumps to the first error. A multi-node
 * job's log can be narrowed to one rank's lines (see logRanks.ts).
 */
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { lastAtMost } from './logBuffer';
import { LogFollower } from './logFollower';
import { RankFilter, rankOf, ranksToOffer } from './logRanks';
import { ERROR_LINE, findLines, firstMatchingLine } from './logSearch';
import {
  atEnd,
  IScrollArea,
  lineWindow,
  scrollTopFor,
  scrollTopOfEnd
} from './logWindow';
import { TextButton } from '../common/textButton';

/**
 * The height of one log line in pixels (the CSS gives lines exactly this height).
 */
export const LOG_LINE_HEIGHT = 18;

/**
 * The height the view assumes before it is measured (and where nothing measures,
 * as in tests without layout).
 */
const UNMEASURED_HEIGHT = 400;

/**
 * What a line shows: a progress bar rewrites its line with carriage returns, and a
 * terminal would show only the text after the last one.
 */
export function shownText(line: string): string {
  const trimmed = line.endsWith('\r') ? line.slice(0, -1) : line;
  const cr = trimmed.lastIndexOf('\r');
  return cr >= 0 ? trimmed.slice(cr + 1) : trimmed;
}

/**
 * The props of the log view.
 */
export interface ILogViewProps {
  log: LogFollower | null;
  error: string | null;
  trans: TranslationBundle;
  onLoadEarlier: () => void;
  /**
   * The job's nodes (pods): a rank filter is offered when there are several, or
   * when the log has rank prefixes.
   */
  nodes?: number | null;
}

/**
 * The search as the view keeps it: the lines found for `query` in the lines held,
 * and which of them is current.
 */
interface ISearchState {
  query: string;
  lines: number[];
  current: number;
  /**
   * The buffer's line shift and line count when searched: new lines are searched on
   * their own, earlier ones put in front mean a new search.
   */
  shift: number;
  searched: number;
  version: number;
}

const NO_SEARCH: ISearchState = {
  query: '',
  lines: [],
  current: -1,
  shift: 0,
  searched: 0,
  version: -1
};

/**
 * The log of the selected job, with its tools.
 */
export function LogView(props: ILogViewProps): JSX.Element {
  const { log, trans } = props;
  const buffer = log?.buffer ?? null;
  const version = buffer?.version ?? 0;
  const bufferLines = buffer?.lineCount ?? 0;
  // The rank shown (null: every line), and its lines among those held.
  const [rank, setRank] = React.useState<number | null>(null);
  const filter = React.useRef(new RankFilter(null));
  if (filter.current.rank !== rank) {
    filter.current = new RankFilter(rank);
  }
  // Rank lines put in front since the last draw, for the view to keep its place.
  const rankLinesInFront = React.useRef(0);
  if (buffer) {
    rankLinesInFront.current += filter.current.update(buffer);
  }
  const rankLines = filter.current.lines;
  const ranks = ranksToOffer(props.nodes, filter.current.seen);
  // The view's line i is the buffer's line bufferLine(i).
  const lineCount = rank === null ? bufferLines : rankLines.length;
  const bufferLine = (i: number): number => (rank === null ? i : rankLines[i]);
  const viewLine = (line: number): number =>
    rank === null ? line : lastAtMost(rankLines, line);
  const shownLine = (line: number): boolean =>
    rank === null || rankOf(buffer?.line(line) ?? '') === rank;
  const viewport = React.useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = React.useState(0);
  const [height, setHeight] = React.useState(UNMEASURED_HEIGHT);
  const [following, setFollowing] = React.useState(true);
  const [search, setSearch] = React.useState<ISearchState>(NO_SEARCH);
  const [target, setTarget] = React.useState<{
    line: number;
    kind: 'match' | 'error';
  } | null>(null);
  const [notice, setNotice] = React.useState('');
  const seenShift = React.useRef(buffer?.shift ?? 0);

  const area = (top = scrollTop): IScrollArea => ({
    scrollTop: top,
    viewportHeight: height,
    lineHeight: LOG_LINE_HEIGHT,
    lineCount
  });

  // Measure the visible height, and again when the panel is resized or shown.
  React.useLayoutEffect(() => {
    const node = viewport.current;
    if (!node) {
      return;
    }
    const measure = () => {
      // A hidden panel (another tab in front) has no height: keep the last one.
      if (node.clientHeight > 0) {
        setHeight(node.clientHeight);
      }
    };
    measure();
    if (typeof ResizeObserver === 'undefined') {
      return;
    }
    const observer = new ResizeObserver(measure);
    observer.observe(node);
    return () => observer.disconnect();
  }, []);

  // When the log grows: stay at the end while following; when earlier lines were
  // put in front (or old ones dropped), keep the same lines in view.
  React.useLayoutEffect(() => {
    const node = viewport.current;
    if (!node || node.clientHeight === 0) {
      return; // hidden: placed when shown and the log moves again
    }
    const shift = buffer?.shift ?? 0;
    const bufferMoved = shift - seenShift.current;
    seenShift.current = shift;
    const moved = rank === null ? bufferMoved : rankLinesInFront.current;
    rankLinesInFront.current = 0;
    if (following) {
      const end = scrollTopOfEnd(area());
      if (node.scrollTop !== end) {
        node.scrollTop = end;
      }
    } else if (moved !== 0) {
      node.scrollTop = Math.max(0, node.scrollTop + moved * LOG_LINE_HEIGHT);
    }
    if (bufferMoved !== 0) {
      setTarget(old => (old ? { ...old, line: old.line + bufferMoved } : old));
    }
    setScrollTop(node.scrollTop);
  }, [version, height, following, rank]);

  // The reader scrolls up: stop following at once, before the browser reports
  // the scroll, so that a line arriving in between does not pull the view back.
  const stopFollowing = () => {
    if (following && (viewport.current?.scrollTop ?? 0) > 0) {
      setFollowing(false);
    }
  };

  // Keep the search up to date as lines come.
  React.useEffect(() => {
    if (!buffer || !search.query) {
      return;
    }
    if (search.version === buffer.version) {
      return;
    }
    setSearch(old => {
      const moved = buffer.shift - old.shift;
      if (moved > 0) {
        return runSearch(old.query, -1); // earlier lines came in front
      }
      // Old lines went from the front (moved < 0): the lines found move up. The
      // last line searched may have grown: search again from it.
      const from = Math.max(0, old.searched + moved - 1);
      const kept = old.lines
        .map(line => line + moved)
        .filter(line => line >= 0 && line < from);
      const lines = kept.concat(
        findLines(buffer, old.query, { fromLine: from }).filter(shownLine)
      );
      const current =
        old.current < 0 ? -1 : lines.indexOf(old.lines[old.current] + moved);
      return {
        ...old,
        lines,
        current,
        shift: buffer.shift,
        searched: lineCount,
        version: buffer.version
      };
    });
  }, [version]);

  const runSearch = (query: string, current: number): ISearchState => {
    if (!buffer || !query) {
      return { ...NO_SEARCH, query };
    }
    const lines = findLines(buffer, query).filter(shownLine);
    return {
      query,
      lines,
      current: lines.length === 0 ? -1 : Math.min(current, lines.length - 1),
      shift: buffer.shift,
      searched: buffer.lineCount,
      version: buffer.version
    };
  };

  const showLine = (line: number, kind: 'match' | 'error') => {
    const node = viewport.current;
    setFollowing(false);
    setTarget({ line, kind });
    if (node) {
      node.scrollTop = scrollTopFor(area(), viewLine(line));
      setScrollTop(node.scrollTop);
    }
  };

  const goToMatch = (step: 1 | -1, state = search) => {
    if (state.lines.length === 0) {
      setSearch(state);
      return;
    }
    const count = state.lines.length;
    const current =
      state.current < 0
        ? step > 0
          ? firstAtOrAfterView(state.lines)
          : count - 1
        : (state.current + step + count) % count;
    setSearch({ ...state, current });
    showLine(state.lines[current], 'match');
  };

  // The first match at or below the line at the top of the view.
  const firstAtOrAfterView = (lines: number[]): number => {
    const top = Math.floor(scrollTop / LOG_LINE_HEIGHT);
    const index = lines.findIndex(line => viewLine(line) >= top);
    return index < 0 ? 0 : index;
  };

  const jumpToEnd = () => {
    setTarget(null);
    setNotice('');
    setFollowing(true);
    const node = viewport.current;
    if (node) {
      node.scrollTop = scrollTopOfEnd(area());
      setScrollTop(node.scrollTop);
    }
  };

  const jumpToFirstError = () => {
    if (!buffer) {
      return;
    }
    const line =
      rank === null
        ? firstMatchingLine(buffer)
        : (rankLines.find(i => ERROR_LINE.test(buffer.line(i))) ?? null);
    if (line === null) {
      setNotice(trans.__('No error in the log.'));
      return;
    }
    setNotice(trans.__('First error: line %1.', (line + 1).toLocaleString()));
    showLine(line, 'error');
  };

  const shown = lineWindow(area());
  const lines: JSX.Element[] = [];
  for (let v = shown.first; v < shown.end; v++) {
    const i = bufferLine(v);
    const isTarget = target !== null && target.line === i;
    lines.push(
      <div
        key={i}
        className={
          'jp-JupyterToJob-logLine' +
          (isTarget ? ` jp-mod-current jp-mod-${target?.kind}` : '')
        }
        data-testid="job-log-line"
        data-line={i + 1}
        aria-current={isTarget ? 'true' : undefined}
      >
        <span className="jp-JupyterToJob-logLineNumber" aria-hidden="true">
          {i + 1}
        </span>
        <LineText
          text={shownText(buffer?.line(i) ?? '')}
          query={search.query}
        />
      </div>
    );
  }

  const state = !log
    ? ''
    : log.complete
      ? trans.__('complete')
      : log.loading
        ? trans.__('loading…')
        : trans.__('following…');
  const count = !search.query
    ? ''
    : search.lines.length === 0
      ? trans.__('No matches')
      : search.current < 0
        ? trans._n(
            '%2 line',
            '%2 lines',
            search.lines.length,
            search.lines.length.toLocaleString()
          )
        : trans.__(
            '%1 of %2 lines',
            (search.current + 1).toLocaleString(),
            search.lines.length.toLocaleString()
          );
  const empty = lineCount === 0;
  return (
    <div
      className="jp-JupyterToJob-log"
      data-testid="job-log-view"
      data-lines={lineCount}
      data-rank={rank === null ? 'all' : String(rank)}
      data-following={following ? 'true' : 'false'}
      data-has-earlier={buffer?.hasEarlier ? 'true' : 'false'}
      data-reading-earlier={log?.fillsEarlier ? 'true' : 'false'}
    >
      <div className="jp-JupyterToJob-logHeader">
        <span className="jp-JupyterToJob-logTitle">{trans.__('Log')}</span>
        <span className="jp-JupyterToJob-hint" data-testid="job-log-state">
          {state}
        </span>
        <span className="jp-JupyterToJob-hint" data-testid="job-log-lines">
          {empty
            ? ''
            : (rank === null
                ? trans._n(
                    '%2 line',
                    '%2 lines',
                    lineCount,
                    lineCount.toLocaleString()
                  )
                : trans._n(
                    '%2 line of rank %3',
                    '%2 lines of rank %3',
                    lineCount,
                    lineCount.toLocaleString(),
                    rank
                  )) +
              (log?.fillsEarlier
                ? ' ' + trans.__('(reading earlier lines…)')
                : buffer?.hasEarlier
                  ? ' ' +
                    trans.__(
                      '(the end of a long log: lines count from where it is shown)'
                    )
                  : '')}
        </span>
        {buffer?.hasEarlier && !log?.fillsEarlier && (
          <TextButton
            testid="job-log-load-earlier"
            onClick={props.onLoadEarlier}
          >
            {trans.__('Load earlier')}
          </TextButton>
        )}
      </div>
      <div
        className="jp-JupyterToJob-logTools"
        role="toolbar"
        aria-label={trans.__('Log tools')}
      >
        {ranks.length > 0 && (
          <select
            className="jp-mod-styled jp-JupyterToJob-logRank"
            data-testid="job-log-rank"
            aria-label={trans.__('Show the lines of')}
            title={trans.__(
              'Each node (rank) of the job writes its own lines; show one alone'
            )}
            value={rank === null ? '' : String(rank)}
            onChange={event => {
              const value = event.target.value;
              setRank(value === '' ? null : Number(value));
              setSearch(NO_SEARCH);
              setTarget(null);
              setNotice('');
              setFollowing(true);
            }}
          >
            <option value="">{trans.__('All ranks')}</option>
            {ranks.map(r => (
              <option key={r} value={String(r)}>
                {trans.__('Rank %1', r)}
              </option>
            ))}
          </select>
        )}
        <input
          type="search"
          className="jp-mod-styled jp-JupyterToJob-logSearch"
          data-testid="job-log-search"
          placeholder={trans.__('Search the log')}
          aria-label={trans.__('Search the log')}
          title={trans.__('Enter: next match; Shift+Enter: previous match')}
          value={search.query}
          onChange={event => {
            setSearch(runSearch(event.target.value, -1));
            setTarget(null);
            setNotice('');
          }}
          onKeyDown={event => {
            if (event.key === 'Enter') {
              event.preventDefault();
              goToMatch(event.shiftKey ? -1 : 1);
            } else if (event.key === 'Escape' && search.query) {
              event.preventDefault();
              event.stopPropagation();
              setSearch(NO_SEARCH);
              setTarget(null);
            }
          }}
        />
        <span
          className="jp-JupyterToJob-hint jp-JupyterToJob-logCount"
          data-testid="job-log-search-count"
          aria-live="polite"
        >
          {count}
        </span>
        <TextButton
          testid="job-log-search-previous"
          disabled={search.lines.length === 0}
          title={trans.__('Previous match (Shift+Enter)')}
          onClick={() => goToMatch(-1)}
        >
          {trans.__('Previous')}
        </TextButton>
        <TextButton
          testid="job-log-search-next"
          disabled={search.lines.length === 0}
          title={trans.__('Next match (Enter)')}
          onClick={() => goToMatch(1)}
        >
          {trans.__('Next')}
        </TextButton>
        <TextButton
          testid="job-log-first-error"
          disabled={empty}
          title={trans.__(
            'Show the first traceback, exception or failure line of the log'
          )}
          onClick={jumpToFirstError}
        >
          {trans.__('Jump to first error')}
        </TextButton>
        <TextButton
          className={following ? undefined : 'jp-JupyterToJob-logJumpEnd'}
          testid="job-log-jump-end"
          disabled={empty}
          title={trans.__('Show the newest lines and keep following them')}
          onClick={jumpToEnd}
        >
          {trans.__('Jump to end')}
        </TextButton>
        <span
          className="jp-JupyterToJob-hint"
          data-testid="job-log-notice"
          aria-live="polite"
        >
          {notice ||
            (!following && log && !log.complete
              ? trans.__('Paused: scrolled up. Jump to end to follow again.')
              : '')}
        </span>
      </div>
      {props.error && (
        <p className="jp-JupyterToJob-message" role="alert">
          {props.error}
        </p>
      )}
      <div
        ref={viewport}
        className="jp-JupyterToJob-logText"
        data-testid="job-log"
        role="log"
        aria-live="off"
        aria-label={trans.__('Job log')}
        tabIndex={0}
        onWheel={event => {
          if (event.deltaY < 0) {
            stopFollowing();
          }
        }}
        onKeyDown={event => {
          if (['ArrowUp', 'PageUp', 'Home'].includes(event.key)) {
            stopFollowing();
          }
        }}
        onScroll={event => {
          const node = event.currentTarget;
          if (node.clientHeight === 0) {
            return; // hidden: the browser dropped the position, not the reader
          }
          setScrollTop(node.scrollTop);
          const end = atEnd(area(node.scrollTop));
          if (end !== following) {
            setFollowing(end);
          }
        }}
      >
        {empty ? (
          <div className="jp-JupyterToJob-logEmpty">
            {log?.complete ? trans.__('(The log is empty.)') : ''}
          </div>
        ) : (
          <div
            className="jp-JupyterToJob-logSpacer"
            style={{ height: shown.totalHeight }}
          >
            <div
              className="jp-JupyterToJob-logLines"
              style={{ transform: `translateY(${shown.offsetTop}px)` }}
            >
              {lines}
            </div>
          </div>
        )}
      </div>
    </div>
  );
}

/**
 * A line's text with the search text marked wherever it occurs.
 */
function LineText(props: { text: string; query: string }): JSX.Element {
  const { text, query } = props;
  const parts: (string | JSX.Element)[] = [];
  let from = 0;
  if (query) {
    const lower = text.toLowerCase();
    const needle = query.toLowerCase();
    let at = lower.length === text.length ? lower.indexOf(needle) : -1;
    while (at >= 0) {
      parts.push(text.slice(from, at));
      parts.push(
        <mark key={at} className="jp-JupyterToJob-logMatch">
          {text.slice(at, at + query.length)}
        </mark>
      );
      from = at + query.length;
      at = lower.indexOf(needle, from);
    }
  }
  parts.push(text.slice(from));
  return <span className="jp-JupyterToJob-logLineText">{parts}</span>;
}
