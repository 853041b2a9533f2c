import { JobsAPI } from '../../common/api';
import { JobAPIError } from '../../common/errors';
import {
  IReclaimWarning,
  notificationText,
  reclaimCountdown,
  timeToSave
} from '../reclaim';
import {
  ISavableDocument,
  KEEP_LABEL,
  ReclaimWatcher
} from '../reclaimWarning';
import {
  makeIdleWarning as idle,
  MINUTE
} from '../../__tests__/session.fixture';

const fetchedAt = new Date('2025-03-03T09:22:00.000Z');
const after = (ms: number) => new Date(fetchedAt.getTime() + ms);

describe('the reclaim countdown in the status bar', () => {
  it('counts the time left from when the lab read the warning', () => {
    const read = { warning: idle(), fetchedAt };
    expect(reclaimCountdown(read, fetchedAt).text).toBe(
      'stops in 8 min (GPU idle)'
    );
    expect(reclaimCountdown(read, after(7.5 * MINUTE)).text).toBe(
      'stops in under a minute (GPU idle)'
    );
    expect(reclaimCountdown(read, after(9 * MINUTE)).msLeft).toBe(0);
    expect(reclaimCountdown(read, fetchedAt).warning).toBe(true);
  });

  it('names each reason in a few words', () => {
    const expired = { warning: idle({ reason: 'grant-expired' }), fetchedAt };
    expect(reclaimCountdown(expired, fetchedAt).text).toContain(
      'allocation expired'
    );
  });

  it('is time to save from a minute before the stop', () => {
    const read = { warning: idle(), fetchedAt };
    expect(timeToSave(read, after(6 * MINUTE))).toBe(false);
    expect(timeToSave(read, after(7 * MINUTE))).toBe(true);
  });

  it("shows the hub's sentence whole in a notification", () => {
    expect(notificationText(idle())).toBe(idle().message);
    expect(notificationText(idle()).length).toBeLessThanOrEqual(140);
  });
});

type Shown = { message: string; options: any; id: string };

function fakeNotify() {
  const shown: Shown[] = [];
  const dismissed: string[] = [];
  const told: string[] = [];
  return {
    shown,
    dismissed,
    told,
    notify: {
      warning: (message: string, options: any) => {
        const id = `n${shown.length}`;
        shown.push({ message, options, id });
        return id;
      },
      dismiss: (id?: string) => {
        dismissed.push(id ?? '');
      },
      success: (message: string) => {
        told.push(message);
        return 's';
      },
      error: (message: string) => {
        told.push(message);
        return 'e';
      }
    }
  };
}

function fakeAPI(answers: (IReclaimWarning | null | Error)[], keep?: any) {
  const calls: string[] = [];
  const api = {
    getReclaimWarning: async () => {
      calls.push('get');
      const next = answers.shift();
      if (next instanceof Error) {
        throw next;
      }
      return { warning: next ?? null };
    },
    keepServer: async () => {
      calls.push('keep');
      if (keep instanceof Error) {
        throw keep;
      }
      return keep;
    }
  } as unknown as JobsAPI;
  return { api, calls };
}

function doc(path: string, dirty: boolean, saves: string[]): ISavableDocument {
  return {
    context: {
      path,
      model: { dirty },
      save: async () => {
        saves.push(path);
      }
    }
  };
}

describe('ReclaimWatcher', () => {
  let opened: ReclaimWatcher | null = null;
  afterEach(() => {
    opened?.dispose();
    opened = null;
  });

  /**
   * A watcher over `api` that refreshes only when the scenario says, telling
   * `notify`, with the open `documents`.
   */
  function watch(
    api: JobsAPI,
    notify: unknown,
    documents: () => ISavableDocument[] = () => []
  ): ReclaimWatcher {
    opened = new ReclaimWatcher({
      api,
      documents,
      notify: notify as any,
      refreshInterval: 1e9
    });
    return opened;
  }

  it('shows a warning once, with the keep button when the hub allows it', async () => {
    const { notify, shown } = fakeNotify();
    const { api } = fakeAPI([idle(), idle()]);
    const watcher = watch(api, notify);
    await watcher.refresh();
    await watcher.refresh();
    expect(shown).toHaveLength(1);
    expect(shown[0].message).toContain('will be stopped at 10:30');
    expect(shown[0].options.autoClose).toBe(false);
    expect(shown[0].options.actions.map((a: any) => a.label)).toEqual([
      KEEP_LABEL
    ]);
  });

  it('offers no keep button when keeping is not allowed, and withdraws a warning that is gone', async () => {
    const { notify, shown, dismissed } = fakeNotify();
    const expired = idle({ reason: 'grant-expired', can_keep: false });
    const { api } = fakeAPI([expired, null]);
    const watcher = watch(api, notify);
    await watcher.refresh();
    expect(shown[0].options.actions).toEqual([]);
    await watcher.refresh();
    expect(dismissed).toEqual(['n0']);
    expect(watcher.current).toBeNull();
  });

  it('keeps the server through the hub and says what the hub answered', async () => {
    const { notify, shown, dismissed, told } = fakeNotify();
    const { api, calls } = fakeAPI([idle()], {
      message: 'Kept.',
      warning: null
    });
    const watcher = watch(api, notify);
    await watcher.refresh();
    shown[0].options.actions[0].callback();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(calls).toEqual(['get', 'keep']);
    expect(dismissed).toEqual(['n0']);
    expect(told).toEqual(['Kept.']);
  });

  it("shows the hub's refusal of a second keep", async () => {
    const { notify, told } = fakeNotify();
    const refusal = new JobAPIError(
      new Response(null, { status: 403, statusText: 'Forbidden' }),
      {
        message: 'Your server cannot be kept: it was kept once already.',
        reason: 'cannot-keep'
      }
    );
    const { api } = fakeAPI([idle()], refusal);
    const watcher = watch(api, notify);
    await watcher.refresh();
    await watcher.keep();
    expect(told[0]).toContain('cannot be kept');
  });

  it('saves the open, modified documents a minute before the stop, once', async () => {
    const saves: string[] = [];
    const { notify } = fakeNotify();
    const { api } = fakeAPI([idle()]);
    const watcher = watch(api, notify, () => [
      doc('train.ipynb', true, saves),
      doc('notes.md', false, saves)
    ]);
    await watcher.refresh();
    const start = watcher.current!.fetchedAt;
    const at = (ms: number) => new Date(start.getTime() + ms);
    expect(await watcher.saveIfDue(at(6 * MINUTE))).toEqual([]);
    expect(await watcher.saveIfDue(at(7 * MINUTE))).toEqual(['train.ipynb']);
    expect(await watcher.saveIfDue(at(7.5 * MINUTE))).toEqual([]);
    expect(saves).toEqual(['train.ipynb']);
  });

  it('keeps the last warning when the server cannot be reached', async () => {
    const { notify, shown } = fakeNotify();
    const { api } = fakeAPI([idle(), new Error('offline')]);
    const watcher = watch(api, notify);
    await watcher.refresh();
    await watcher.refresh();
    expect(watcher.current?.warning.reason).toBe('idle');
    expect(shown).toHaveLength(1);
  });
});
