import { Dialog } from '@jupyterlab/apputils';

/**
 * What the Run as Job dialog and the pipeline dialogs share: the OK button (class
 * `jp-JupyterToJob-submit`) sends the form and closes the dialog only once the
 * server took it; Cancel and the close button close it at once.
 */
export abstract class FormDialog<T> extends Dialog<T> {
  constructor(
    options: Partial<Dialog.IOptions<T>> & { buttons: Dialog.IButton[] }
  ) {
    super(options);
    this.addClass('jp-JupyterToJob-dialog');
    // (the stylesheet lets it take the window's height, not JupyterLab's 500px)
    this.node
      .querySelector('.jp-Dialog-content')
      ?.classList.add('jp-JupyterToJob-dialogContent');
    this._buttonList = options.buttons;
  }

  /**
   * Resolve with a button: the OK button closes once `send()` says the server took
   * the form; the others close at once, unless `handleButton` handled them.
   */
  resolve(index?: number): void {
    const button = this._buttonList[index ?? this._buttonList.length - 1];
    if (button && this.handleButton(button)) {
      return;
    }
    if (!button?.accept) {
      super.resolve(index);
      return;
    }
    void this.send().then(sent => {
      if (sent) {
        super.resolve(index);
      }
    });
  }

  /**
   * Handle the DOM events of the dialog, apart from `input`.
   *
   * The base class checks the DOM for invalid fields on each `input` event and then
   * enables Submit and refuses to close by itself. It runs before React renders the
   * keystroke, so it lags one behind: it could enable Submit while the form loads, or
   * keep the dialog open after the job was created. The form checks itself instead,
   * and says what is wrong in words.
   */
  handleEvent(event: Event): void {
    if (event.type === 'input') {
      return;
    }
    super.handleEvent(event);
  }

  /**
   * Send the form; true when the server took it (the dialog then closes).
   */
  protected abstract send(): Promise<boolean>;

  /**
   * A button that neither sends nor closes (Save as Template); true when handled.
   */
  protected handleButton(button: Dialog.IButton): boolean {
    void button;
    return false;
  }

  /**
   * Name the OK button (Submit, Run, Create Schedule).
   */
  protected renameSubmit(label: string): void {
    const node = this.node.querySelector(
      '.jp-JupyterToJob-submit .jp-Dialog-buttonLabel'
    );
    if (node) {
      node.textContent = label;
    }
  }

  private _buttonList: Dialog.IButton[];
}
