/**
 * Scenario: a student clicks the GPU item of the status bar and reads her session's
 * details, with what she can do from there.
 */
import { JobsAPI } from '../../common/api';
import { CommandIDs } from '../../common/commands';
import {
  HUB_CONTROL_PANEL,
  ICommandRunner,
  SessionStatus,
  SessionStatusModel
} from '../sessionStatus';
import { makeServerSession, MINUTE } from '../../__tests__/session.fixture';

const SESSION = makeServerSession({
  profile: 'Machine Learning 101',
  session_end: new Date(Date.now() + 42 * MINUTE).toISOString()
});

function statusItem(commands: string[]): {
  item: SessionStatus;
  executed: string[];
} {
  const api = { getSession: async () => SESSION } as unknown as JobsAPI;
  const model = new SessionStatusModel({ api });
  const executed: string[] = [];
  const runner: ICommandRunner = {
    hasCommand: id => commands.includes(id),
    execute: async id => {
      executed.push(id);
    }
  };
  const item = new SessionStatus(model, runner);
  document.body.appendChild(item.node);
  made.push(item);
  return { item, executed };
}

function details(): HTMLElement | null {
  return document.querySelector('.jp-JupyterToJob-sessionDetails');
}

async function settle(): Promise<void> {
  await new Promise(resolve => setTimeout(resolve, 0));
}

const made: SessionStatus[] = [];

afterEach(() => {
  for (const item of made.splice(0)) {
    item.dispose();
  }
  document.body.innerHTML = '';
});

describe('clicking the GPU item of the status bar', () => {
  it('opens the session details: the profile, the share and when the server stops', async () => {
    const { item } = statusItem([CommandIDs.openJobsPanel]);
    await item.model.refresh();

    item.node.click();
    await settle();

    const text = details()?.textContent ?? '';
    expect(text).toContain('Profile: Machine Learning 101');
    expect(text).toContain('GPU: 1/4 of an RTX 4090, 6 GiB');
    expect(text).toContain('Your server stops at');
  });

  it('offers the Jobs panel, and the hub control panel only behind a hub', async () => {
    const standalone = statusItem([CommandIDs.openJobsPanel]);
    await standalone.item.model.refresh();
    standalone.item.node.click();
    await settle();
    const buttons = [...(details()?.querySelectorAll('button') ?? [])].map(
      b => b.textContent
    );
    expect(buttons).toEqual(['Open Jobs panel']);
    standalone.item.node.click(); // closes it
    await settle();
    expect(details()).toBeNull();

    const behindHub = statusItem([CommandIDs.openJobsPanel, HUB_CONTROL_PANEL]);
    await behindHub.item.model.refresh();
    behindHub.item.node.click();
    await settle();
    const hubButton = [...(details()?.querySelectorAll('button') ?? [])].find(
      b => b.textContent === 'Hub control panel'
    );
    expect(hubButton).toBeDefined();
    hubButton!.click();
    await settle();
    expect(behindHub.executed).toEqual([HUB_CONTROL_PANEL]);
    expect(details()).toBeNull();
  });

  it('opens from the keyboard too', async () => {
    const { item } = statusItem([]);
    await item.model.refresh();
    item.node.dispatchEvent(
      new KeyboardEvent('keydown', { key: 'Enter', bubbles: true })
    );
    await settle();
    expect(details()).not.toBeNull();
  });
});
