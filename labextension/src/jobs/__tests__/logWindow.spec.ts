import {
  atEnd,
  IScrollArea,
  lineWindow,
  scrollTopFor,
  scrollTopOfEnd
} from '../logWindow';

const LOG: IScrollArea = {
  scrollTop: 0,
  viewportHeight: 360, // 20 lines of 18 px
  lineHeight: 18,
  lineCount: 200000
};

describe('lineWindow, the lines of a long log that are in the page', () => {
  it('at the top: the lines in view and the overscan below them', () => {
    expect(lineWindow(LOG, 10)).toEqual({
      first: 0,
      end: 30,
      offsetTop: 0,
      totalHeight: 3600000
    });
  });

  it('at the end: the last lines, placed where they are in the spacer', () => {
    const end = { ...LOG, scrollTop: scrollTopOfEnd(LOG) };
    const window = lineWindow(end, 10);
    expect(window.end).toBe(200000);
    expect(window.first).toBe(200000 - 20 - 10);
    expect(window.offsetTop).toBe(window.first * 18);
  });

  it('in the middle, scrolled by part of a line', () => {
    const window = lineWindow({ ...LOG, scrollTop: 18 * 1000 + 9 }, 5);
    expect(window.first).toBe(995);
    expect(window.end).toBe(1021 + 5);
  });

  it('a scroll position past the end (the log got shorter) shows the last lines', () => {
    const window = lineWindow({ ...LOG, lineCount: 10, scrollTop: 99999 }, 5);
    expect(window).toEqual({
      first: 0,
      end: 10,
      offsetTop: 0,
      totalHeight: 180
    });
  });

  it('an empty log has no lines in the page', () => {
    expect(lineWindow({ ...LOG, lineCount: 0 })).toEqual({
      first: 0,
      end: 0,
      offsetTop: 0,
      totalHeight: 0
    });
  });
});

describe('following and jumping', () => {
  it('is at the end only within half a line of it', () => {
    const end = scrollTopOfEnd(LOG);
    expect(end).toBe(200000 * 18 - 360);
    expect(atEnd({ ...LOG, scrollTop: end })).toBe(true);
    expect(atEnd({ ...LOG, scrollTop: end - 8 })).toBe(true);
    expect(atEnd({ ...LOG, scrollTop: end - 18 })).toBe(false);
    // A log shorter than the view is always at its end
    expect(atEnd({ ...LOG, lineCount: 3 })).toBe(true);
  });

  it('puts a found line in the middle of the view, within the scroll range', () => {
    expect(scrollTopFor(LOG, 1000)).toBe(18 * 1000 - 171);
    expect(scrollTopFor(LOG, 2)).toBe(0);
    expect(scrollTopFor(LOG, 199999)).toBe(scrollTopOfEnd(LOG));
  });
});
