/**
 * Opening TensorBoard from the lab: the folder dialog's body, what is asked of the
 * server, the tab it opens (once per TensorBoard), and what the person is told.
 */
import { MainAreaWidget, Notification } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { nullTranslator } from '@jupyterlab/translation';

import {
  createTensorBoardTab,
  DEFAULT_FOLDER,
  FolderBody,
  ITensorBoard,
  ITensorBoardHost,
  jobFolder,
  openTensorBoard
} from '../tensorboard';

const trans = nullTranslator.load('jupyter_to_job');

const BOARD: ITensorBoard = {
  board_id: '0123456789ab',
  folder: 'runs',
  url: 'jupyter-to-job/tensorboard/0123456789ab/',
  has_event_files: true,
  notice: null
};

/** A server that answers every request with `answer`, recording the requests. */
function fakeServer(answer: () => Response) {
  const requests: { method: string; url: string; body: string | null }[] = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input as Request;
    requests.push({
      method: request.method ?? init?.method ?? 'GET',
      url: request.url ?? String(input),
      body: request.body ? await request.text() : null
    });
    return answer();
  };
  const serverSettings = ServerConnection.makeSettings({
    baseUrl: 'http://hub.example/user/ana/',
    fetch: fetch as typeof window.fetch
  });
  return { serverSettings, requests };
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'Content-Type': 'application/json' }
  });
}

/** A lab with no tab open yet, recording what is added and brought forward. */
function fakeHost(serverSettings: ServerConnection.ISettings) {
  const tabs: MainAreaWidget[] = [];
  const activated: string[] = [];
  const host: ITensorBoardHost = {
    serverSettings,
    trans,
    find: id => tabs.find(tab => tab.id === id) ?? null,
    add: tab => {
      tabs.push(tab);
    },
    activate: id => {
      activated.push(id);
    }
  };
  return { host, tabs, activated };
}

describe('The Open TensorBoard dialog', () => {
  it('offers runs/ and gives the folder typed, trimmed', () => {
    const body = new FolderBody(trans);
    expect(body.input.value).toBe(DEFAULT_FOLDER);
    expect(DEFAULT_FOLDER).toBe('runs');
    body.input.value = '  experiments/lr-sweep ';
    expect(body.getValue()).toBe('experiments/lr-sweep');
    expect(body.node.textContent).toContain('Folder with your event files');
  });
});

describe('A job’s TensorBoard folder', () => {
  it('is the folder of the job’s notebook, where it ran', () => {
    expect(jobFolder('projects/mnist/train.ipynb')).toBe('projects/mnist');
    expect(jobFolder('train.ipynb')).toBe('');
  });
});

describe('openTensorBoard', () => {
  let notices: string[] = [];
  beforeEach(() => {
    notices = [];
    jest
      .spyOn(Notification, 'info')
      .mockImplementation(message => (notices.push(`info: ${message}`), ''));
    jest
      .spyOn(Notification, 'error')
      .mockImplementation(message => (notices.push(`error: ${message}`), ''));
  });
  afterEach(() => jest.restoreAllMocks());

  it('asks the server for the folder and shows TensorBoard in a tab', async () => {
    const { serverSettings, requests } = fakeServer(() => json(BOARD));
    const { host, tabs, activated } = fakeHost(serverSettings);

    const board = await openTensorBoard(host, 'runs');

    expect(requests).toEqual([
      {
        method: 'POST',
        url: 'http://hub.example/user/ana/jupyter-to-job/api/tensorboards',
        body: JSON.stringify({ folder: 'runs' })
      }
    ]);
    expect(board?.board_id).toBe(BOARD.board_id);
    expect(tabs).toHaveLength(1);
    expect(tabs[0].title.label).toBe('TensorBoard: runs');
    const frame = tabs[0].node.querySelector('iframe') as HTMLIFrameElement;
    expect(frame.src).toBe(
      'http://hub.example/user/ana/jupyter-to-job/tensorboard/0123456789ab/'
    );
    expect(frame.getAttribute('sandbox')).toContain('allow-scripts');
    expect(activated).toEqual([tabs[0].id]);
    expect(notices).toEqual([]);
  });

  it('brings the open tab forward when the same TensorBoard is opened again', async () => {
    const { serverSettings } = fakeServer(() => json(BOARD));
    const { host, tabs, activated } = fakeHost(serverSettings);

    await openTensorBoard(host, 'runs');
    await openTensorBoard(host, '/runs/');

    expect(tabs).toHaveLength(1);
    expect(activated).toEqual([tabs[0].id, tabs[0].id]);
  });

  it('says there are no event files yet, and still opens', async () => {
    const notice =
      "There are no TensorBoard event files in 'runs' yet. TensorBoard shows them as your training writes them (it looks again every few seconds).";
    const { serverSettings } = fakeServer(() =>
      json({ ...BOARD, has_event_files: false, notice })
    );
    const { host, tabs } = fakeHost(serverSettings);

    await openTensorBoard(host, 'runs');

    expect(notices).toEqual([`info: ${notice}`]);
    expect(tabs).toHaveLength(1);
  });

  it('tells the server’s sentence when the folder is not there, and opens nothing', async () => {
    const message =
      "There is no folder 'runs' in your files yet. Write your event files there first (for example SummaryWriter('runs/experiment-1')), or name the folder your training writes to.";
    const { serverSettings } = fakeServer(() =>
      json({ message, reason: 'no-such-folder' }, 404)
    );
    const { host, tabs } = fakeHost(serverSettings);

    const board = await openTensorBoard(host, 'runs');

    expect(board).toBeNull();
    expect(tabs).toHaveLength(0);
    expect(notices).toEqual([`error: TensorBoard did not open: ${message}`]);
  });
});

describe('A TensorBoard tab', () => {
  it('names the top of the person’s files in words', () => {
    const { serverSettings } = fakeServer(() => json(BOARD));
    const tab = createTensorBoardTab(
      { ...BOARD, folder: '.' },
      serverSettings,
      trans
    );
    expect(tab.title.label).toBe('TensorBoard: your files');
    expect(tab.node.dataset.folder).toBe('.');
  });
});
