/**
 * TensorBoard in the lab: open it over a folder of the user's files, in a tab.
 *
 * The server starts one TensorBoard per folder (or finds the one running) and
 * proxies it behind its own login (jupyter_to_job/extension/tensorboard.py); the
 * tab shows it in a frame. Opening the same folder again brings its tab forward.
 */
import {
  Dialog,
  IFrame,
  MainAreaWidget,
  showDialog
} from '@jupyterlab/apputils';
import { PathExt, URLExt } from '@jupyterlab/coreutils';
import { Notification } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import { requestAPI } from '../common/handler';
import { tensorboardIcon } from '../common/icons';

/**
 * The folder TensorBoard opens on when the person names none (the server's
 * default, `c.TensorBoardApp.default_folder`, is the same).
 */
export const DEFAULT_FOLDER = 'runs';

/**
 * A running TensorBoard, as the server describes it.
 */
export interface ITensorBoard {
  board_id: string;
  /**
   * The folder it reads, relative to the server's root.
   */
  folder: string;
  /**
   * Where it is, relative to the server's base URL (ends with a slash).
   */
  url: string;
  /**
   * Whether the folder had event files when it was opened (null: too large to tell).
   */
  has_event_files: boolean | null;
  /**
   * A sentence for the person (no event files yet), or null.
   */
  notice: string | null;
}

/**
 * Start TensorBoard over `folder` on the server, or find the one running.
 *
 * @throws JobAPIError with the server's sentence (no such folder, not installed).
 */
export function startTensorBoard(
  folder: string,
  serverSettings: ServerConnection.ISettings
): Promise<ITensorBoard> {
  return requestAPI<ITensorBoard>(
    'api/tensorboards',
    { method: 'POST', body: JSON.stringify({ folder }) },
    serverSettings
  );
}

/**
 * The folder a job's TensorBoard reads: the job's working folder, the folder of
 * its notebook in the owner's files ('' for the top of them).
 */
export function jobFolder(inputPath: string): string {
  return PathExt.dirname(inputPath);
}

/**
 * The page address of a TensorBoard.
 */
export function tensorBoardPage(
  board: ITensorBoard,
  serverSettings: ServerConnection.ISettings
): string {
  return URLExt.join(serverSettings.baseUrl, board.url);
}

/**
 * The DOM id of the tab of a TensorBoard (one tab per TensorBoard).
 */
export function tabId(board: ITensorBoard): string {
  return `jp-JupyterToJob-tensorboard-${board.board_id}`;
}

/**
 * A tab that shows a TensorBoard in a frame.
 */
export function createTensorBoardTab(
  board: ITensorBoard,
  serverSettings: ServerConnection.ISettings,
  trans: TranslationBundle
): MainAreaWidget<IFrame> {
  // TensorBoard's page is the server's own (same origin, behind its login), and
  // needs its scripts; it may open links in new tabs.
  const content = new IFrame({
    sandbox: [
      'allow-scripts',
      'allow-same-origin',
      'allow-popups',
      'allow-downloads'
    ]
  });
  content.url = tensorBoardPage(board, serverSettings);
  content.addClass('jp-JupyterToJob-tensorboardFrame');
  const tab = new MainAreaWidget({ content });
  tab.id = tabId(board);
  tab.addClass('jp-JupyterToJob-tensorboard');
  tab.node.dataset.folder = board.folder;
  const where = board.folder === '.' ? trans.__('your files') : board.folder;
  tab.title.label = trans.__('TensorBoard: %1', where);
  tab.title.caption = trans.__('TensorBoard over %1', where);
  tab.title.icon = tensorboardIcon;
  tab.title.closable = true;
  return tab;
}

/**
 * The body of the "Open TensorBoard" dialog: the folder to read.
 */
export class FolderBody extends Widget implements Dialog.IBodyWidget<string> {
  constructor(trans: TranslationBundle, folder = DEFAULT_FOLDER) {
    super();
    this.addClass('jp-JupyterToJob-tensorboardDialog');
    const label = document.createElement('label');
    label.textContent = trans.__('Folder with your event files');
    this._input = document.createElement('input');
    this._input.className = 'jp-mod-styled';
    this._input.value = folder;
    this._input.dataset.testid = 'tensorboard-folder';
    this._input.setAttribute('aria-describedby', 'jp-JupyterToJob-tbHint');
    label.appendChild(this._input);
    const hint = document.createElement('p');
    hint.id = 'jp-JupyterToJob-tbHint';
    hint.className = 'jp-JupyterToJob-hint';
    hint.textContent = trans.__(
      'Relative to your files, where SummaryWriter writes (for example runs/). ' +
        'TensorBoard reads every run below it, and shows new ones as they are written.'
    );
    this.node.append(label, hint);
  }

  getValue(): string {
    return this._input.value.trim();
  }

  /**
   * The input, focused when the dialog opens.
   */
  get input(): HTMLInputElement {
    return this._input;
  }

  private _input: HTMLInputElement;
}

/**
 * Ask for the folder; null when the person cancels.
 */
export async function askFolder(
  trans: TranslationBundle,
  folder = DEFAULT_FOLDER
): Promise<string | null> {
  const body = new FolderBody(trans, folder);
  const answer = await showDialog({
    title: trans.__('Open TensorBoard'),
    body,
    focusNodeSelector: 'input',
    buttons: [
      Dialog.cancelButton({ label: trans.__('Cancel') }),
      Dialog.okButton({ label: trans.__('Open') })
    ]
  });
  if (!answer.button.accept) {
    return null;
  }
  return answer.value || DEFAULT_FOLDER;
}

/**
 * What opening TensorBoard needs from the lab.
 */
export interface ITensorBoardHost {
  serverSettings: ServerConnection.ISettings;
  trans: TranslationBundle;
  /**
   * The tab already open with this id, if any.
   */
  find(id: string): MainAreaWidget | null;
  /**
   * Put a new tab in the main area (and track it).
   */
  add(tab: MainAreaWidget<IFrame>): void;
  /**
   * Bring a tab forward.
   */
  activate(id: string): void;
}

/**
 * Open TensorBoard over `folder` in a tab (its tab again when it is open), and
 * tell the person what the server said: why it cannot, or that there are no
 * event files yet.
 *
 * @returns The TensorBoard, or null when it could not be opened.
 */
export async function openTensorBoard(
  host: ITensorBoardHost,
  folder: string
): Promise<ITensorBoard | null> {
  const { trans } = host;
  let board: ITensorBoard;
  try {
    board = await startTensorBoard(folder, host.serverSettings);
  } catch (error) {
    Notification.error(
      trans.__('TensorBoard did not open: %1', (error as Error).message),
      { autoClose: false }
    );
    return null;
  }
  if (board.notice) {
    Notification.info(board.notice, { autoClose: 8000 });
  }
  const id = tabId(board);
  if (!host.find(id)) {
    host.add(createTensorBoardTab(board, host.serverSettings, trans));
  }
  host.activate(id);
  return board;
}
