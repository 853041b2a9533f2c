/**
 * The arithmetic of a virtualised log: every line is `lineHeight` pixels tall, a
 * spacer gives the scroll area the height of all lines, and only the lines in view
 * (and a few around them) are in the page.
 */

/**
 * What the log view knows about its scroll area.
 */
export interface IScrollArea {
  /**
   * Pixels scrolled from the top.
   */
  scrollTop: number;
  /**
   * The height of the visible part, in pixels.
   */
  viewportHeight: number;
  /**
   * The height of one line, in pixels.
   */
  lineHeight: number;
  /**
   * The lines of the log.
   */
  lineCount: number;
}

/**
 * The lines to put in the page: `first` up to (not including) `end`, placed
 * `offsetTop` pixels from the top of the spacer.
 */
export interface ILineWindow {
  first: number;
  end: number;
  offsetTop: number;
  /**
   * The spacer's height: all lines.
   */
  totalHeight: number;
}

/**
 * The lines in view plus `overscan` lines above and below, so that a small scroll
 * shows lines already drawn.
 */
export function lineWindow(area: IScrollArea, overscan = 20): ILineWindow {
  const { lineHeight, lineCount } = area;
  const totalHeight = lineCount * lineHeight;
  const maxTop = Math.max(0, totalHeight - area.viewportHeight);
  const top = Math.min(Math.max(0, area.scrollTop), maxTop);
  const firstInView = Math.floor(top / lineHeight);
  const endInView = Math.ceil((top + area.viewportHeight) / lineHeight);
  const first = Math.max(0, firstInView - overscan);
  const end = Math.min(lineCount, endInView + overscan);
  return {
    first,
    end: Math.max(first, end),
    offsetTop: first * lineHeight,
    totalHeight
  };
}

/**
 * Whether the view shows the end of the log (within half a line): following keeps
 * it there while the log grows.
 */
export function atEnd(area: IScrollArea): boolean {
  const totalHeight = area.lineCount * area.lineHeight;
  return (
    totalHeight - area.scrollTop - area.viewportHeight < area.lineHeight / 2
  );
}

/**
 * The scroll position that shows line `index` in the middle of the view.
 */
export function scrollTopFor(area: IScrollArea, index: number): number {
  const totalHeight = area.lineCount * area.lineHeight;
  const maxTop = Math.max(0, totalHeight - area.viewportHeight);
  const centered =
    index * area.lineHeight - (area.viewportHeight - area.lineHeight) / 2;
  return Math.round(Math.min(maxTop, Math.max(0, centered)));
}

/**
 * The scroll position of the end of the log.
 */
export function scrollTopOfEnd(area: IScrollArea): number {
  return Math.max(0, area.lineCount * area.lineHeight - area.viewportHeight);
}
