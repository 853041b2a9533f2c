/**
 * The log view as rendered (without layout: the view assumes its default height).
 */
import { nullTranslator } from '@jupyterlab/translation';
import * as React from 'react';
import { act } from 'react';
import { ReactWidget } from '@jupyterlab/ui-components';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { utf8ByteLength } from '../logBuffer';
import { LogFollower } from '../logFollower';
import { LogView, shownText } from '../logView';

// React's act() outside a test renderer
(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

/** A follower that has read all of a finished job's log `text`. */
async function finishedLog(
  text: string,
  window?: number
): Promise<LogFollower> {
  const size = utf8ByteLength(text);
  const follower = new LogFollower(
    async (offset, limit) => {
      const data = text.slice(offset, offset + limit); // ASCII: bytes are characters
      return {
        job_id: 'j',
        offset,
        next_offset: offset + data.length,
        size,
        data,
        complete: offset + data.length >= size
      };
    },
    { knownSize: size, window }
  );
  await follower.poll();
  while (follower.fillsEarlier) {
    await follower.fillEarlier();
  }
  return follower;
}

const ROWS = Array.from(
  { length: 200000 },
  (_, i) => `[cell 1] row ${String(i).padStart(6, '0')}\n`
).join('');

/** The widgets a scenario put in the page, taken out after it. */
const inPage: Widget[] = [];
afterEach(() => {
  act(() => inPage.splice(0).forEach(widget => widget.dispose()));
});

/** ``shown``, put in the page and rendered. */
async function attached(shown: ReactWidget): Promise<ReactWidget> {
  await act(async () => {
    Widget.attach(shown, document.body);
    MessageLoop.sendMessage(shown, Widget.Msg.UpdateRequest);
  });
  inPage.push(shown);
  return shown;
}

/**
 * A running job's log `text()`, shown for a job of `nodes` nodes as the Jobs panel
 * renders it (a new element at each update); `poll` reads what came and renders it.
 */
async function showRunning(text: () => string, nodes?: number) {
  const follower = new LogFollower(async (offset, limit) => {
    const data = text().slice(offset, offset + limit);
    return {
      job_id: 'j',
      offset,
      next_offset: offset + data.length,
      size: text().length,
      data,
      complete: false
    };
  });
  await follower.poll();
  const shown = new (class extends ReactWidget {
    render(): JSX.Element {
      return (
        <LogView
          log={follower}
          error={null}
          trans={nullTranslator.load('jupyter_to_job')}
          onLoadEarlier={() => undefined}
          nodes={nodes}
        />
      );
    }
  })();
  await attached(shown);
  const byTestId = (id: string) =>
    shown.node.querySelector(`[data-testid="${id}"]`) as HTMLElement;
  const shownLines = () =>
    [...shown.node.querySelectorAll('[data-testid="job-log-line"]')].map(
      line => line.querySelector('.jp-JupyterToJob-logLineText')?.textContent
    );
  const poll = async () => {
    await follower.poll();
    await act(async () => {
      MessageLoop.sendMessage(shown, Widget.Msg.UpdateRequest);
    });
  };
  return { byTestId, shownLines, poll };
}

describe('LogView', () => {
  let node: HTMLElement;
  let widget: Widget | null = null;

  async function render(log: LogFollower): Promise<void> {
    act(() => widget?.dispose());
    const shown = ReactWidget.create(
      <LogView
        log={log}
        error={null}
        trans={nullTranslator.load('jupyter_to_job')}
        onLoadEarlier={() => undefined}
      />
    );
    widget = await attached(shown);
    node = shown.node;
  }

  const byTestId = (id: string) =>
    node.querySelector(`[data-testid="${id}"]`) as HTMLElement;

  it('puts only a window of a 200,000-line log in the page, and counts all lines', async () => {
    const log = await finishedLog(
      ROWS +
        '[cell 2] ValueError: bad\n[job] failed: The job failed in cell 2\n'
    );
    await render(log);
    expect(byTestId('job-log-view').dataset.lines).toBe('200002');
    expect(byTestId('job-log-lines').textContent).toBe(
      `${(200002).toLocaleString()} lines`
    );
    expect(byTestId('job-log-state').textContent).toBe('complete');
    const shown = node.querySelectorAll('[data-testid="job-log-line"]');
    expect(shown.length).toBeGreaterThan(0);
    expect(shown.length).toBeLessThan(100);
  });

  it('says when it shows only the end of a log longer than the page keeps', async () => {
    // Given a page that keeps 64 KiB of log, and a 5 MiB log
    await render(await finishedLog(ROWS, 64 * 1024));
    // Then it says the lines shown are the end, and offers to load earlier ones
    expect(byTestId('job-log-lines').textContent).toMatch(
      /^[\d,]+ lines \(the end of a long log: lines count from where it is shown\)$/
    );
    expect(byTestId('job-log-load-earlier')).not.toBeNull();
  });

  it('counts the lines a search finds and steps through them', async () => {
    await render(await finishedLog(ROWS));
    const search = byTestId('job-log-search') as HTMLInputElement;
    await act(async () => {
      setInput(search, 'row 1000');
    });
    expect(byTestId('job-log-search-count').textContent).toBe('100 lines');
    await act(async () => {
      byTestId('job-log-search-next').click();
    });
    expect(byTestId('job-log-search-count').textContent).toBe('1 of 100 lines');
    await act(async () => {
      byTestId('job-log-search-previous').click();
    });
    expect(byTestId('job-log-search-count').textContent).toBe(
      '100 of 100 lines'
    );
    await act(async () => {
      setInput(search, 'no such text');
    });
    expect(byTestId('job-log-search-count').textContent).toBe('No matches');
    expect(
      (byTestId('job-log-search-next') as HTMLButtonElement).disabled
    ).toBe(true);
  });

  it('says which line the first error is on, or that there is none', async () => {
    await render(
      await finishedLog(
        '[job] starting\n[cell 1] fine\n[cell 2] Traceback (most recent call last):\n[job] failed: x\n'
      )
    );
    await act(async () => {
      byTestId('job-log-first-error').click();
    });
    expect(byTestId('job-log-notice').textContent).toBe('First error: line 3.');
    const current = node.querySelector('.jp-mod-current') as HTMLElement;
    expect(current.dataset.line).toBe('3');
    expect(current.classList.contains('jp-mod-error')).toBe(true);
    expect(byTestId('job-log-view').dataset.following).toBe('false');

    await render(await finishedLog('[job] starting\n[cell 1] fine\n'));
    await act(async () => {
      byTestId('job-log-first-error').click();
    });
    expect(byTestId('job-log-notice').textContent).toBe('No error in the log.');
  });
});

describe('LogView while the job runs', () => {
  it('keeps the count of a search up to date as lines come', async () => {
    // Given a running job's log, shown, with a search for "x"
    let text = '[cell 1] a x\n[cell 1] b\n';
    const { byTestId, poll } = await showRunning(() => text);
    await act(async () => {
      setInput(byTestId('job-log-search') as HTMLInputElement, 'x');
    });
    expect(byTestId('job-log-search-count').textContent).toBe('1 line');
    expect(byTestId('job-log-state').textContent).toBe('following…');

    // When the job writes two more lines with "x", the second one in two pieces
    text += '[cell 1] c x\n[cell 1] d';
    await poll();
    text += ' x\n';
    await poll();

    // Then the count includes them, each line once
    expect(byTestId('job-log-search-count').textContent).toBe('3 lines');
    expect(byTestId('job-log-view').dataset.lines).toBe('4');
  });
});

describe('LogView of a multi-node job', () => {
  const pick = async (select: HTMLElement, value: string) => {
    await act(async () => {
      (select as HTMLSelectElement).value = value;
      select.dispatchEvent(new Event('change', { bubbles: true }));
    });
  };

  it('offers no rank filter for a one-node job', async () => {
    const { byTestId } = await showRunning(() => '[cell 1] a\n[cell 1] b\n', 1);
    expect(byTestId('job-log-rank')).toBeNull();
  });

  it('offers every rank of a two-node job before its lines come', async () => {
    const { byTestId } = await showRunning(() => '[job] starting\n', 2);
    const options = [
      ...(byTestId('job-log-rank') as HTMLSelectElement).options
    ].map(option => option.textContent);
    expect(options).toEqual(['All ranks', 'Rank 0', 'Rank 1']);
  });

  it('shows one rank’s lines alone, with their own line numbers, and all again', async () => {
    // Given a two-rank log whose job does not say how many nodes it has
    const text =
      '[rank 0] [cell 1] a0\n[rank 1] [cell 1] a1\n[rank 0] [cell 2] b0\n[rank 1] [cell 2] b1\n';
    const { byTestId, shownLines } = await showRunning(() => text);

    // When the reader picks rank 1
    await pick(byTestId('job-log-rank'), '1');

    // Then only rank 1's lines show, numbered as in the whole log
    expect(shownLines()).toEqual([
      '[rank 1] [cell 1] a1',
      '[rank 1] [cell 2] b1'
    ]);
    const numbers = [
      ...document.querySelectorAll('[data-testid="job-log-line"]')
    ].map(line => (line as HTMLElement).dataset.line);
    expect(numbers).toEqual(['2', '4']);
    expect(byTestId('job-log-lines').textContent).toBe('2 lines of rank 1');
    expect(byTestId('job-log-view').dataset.rank).toBe('1');

    // And All ranks shows every line again
    await pick(byTestId('job-log-rank'), '');
    expect(shownLines().length).toBe(4);
  });

  it('keeps following the chosen rank as the job writes', async () => {
    // Given a running two-node job's log, filtered on rank 0
    let text = '[rank 0] [cell 1] start 0\n[rank 1] [cell 1] start 1\n';
    const { byTestId, shownLines, poll } = await showRunning(() => text, 2);
    await pick(byTestId('job-log-rank'), '0');
    expect(shownLines()).toEqual(['[rank 0] [cell 1] start 0']);

    // When both ranks write more, rank 0's last line in two pieces
    text += '[rank 1] [cell 2] step 1\n[rank 0] [cell 2] st';
    await poll();
    text += 'ep 1\n[rank 1] [cell 3] step 2\n';
    await poll();

    // Then the view shows rank 0's lines only, the new one once, and still follows
    expect(shownLines()).toEqual([
      '[rank 0] [cell 1] start 0',
      '[rank 0] [cell 2] step 1'
    ]);
    expect(byTestId('job-log-view').dataset.following).toBe('true');
    expect(byTestId('job-log-view').dataset.lines).toBe('2');
  });

  it('searches and finds the first error within the chosen rank', async () => {
    const text =
      '[rank 0] [cell 1] loss 1\n[rank 1] [cell 1] loss 2\n' +
      '[rank 1] [cell 2] RuntimeError: NCCL timeout\n[rank 0] [cell 2] loss 3\n';
    const { byTestId } = await showRunning(() => text, 2);
    await pick(byTestId('job-log-rank'), '0');

    await act(async () => {
      setInput(byTestId('job-log-search') as HTMLInputElement, 'loss');
    });
    expect(byTestId('job-log-search-count').textContent).toBe('2 lines');
    await act(async () => {
      byTestId('job-log-first-error').click();
    });
    expect(byTestId('job-log-notice').textContent).toBe('No error in the log.');

    await pick(byTestId('job-log-rank'), '1');
    await act(async () => {
      byTestId('job-log-first-error').click();
    });
    expect(byTestId('job-log-notice').textContent).toBe('First error: line 3.');
  });
});

describe('shownText', () => {
  it('shows what a terminal shows of a progress bar rewritten with \\r', () => {
    expect(shownText('[cell 1] 10%\r[cell 1] 50%\r[cell 1] 100%')).toBe(
      '[cell 1] 100%'
    );
    expect(shownText('epoch 1 done\r')).toBe('epoch 1 done');
    expect(shownText('plain')).toBe('plain');
  });
});

/** Type `value` into a React-controlled input. */
function setInput(input: HTMLInputElement, value: string): void {
  const setter = Object.getOwnPropertyDescriptor(
    HTMLInputElement.prototype,
    'value'
  )!.set!;
  setter.call(input, value);
  input.dispatchEvent(new Event('input', { bubbles: true }));
}
