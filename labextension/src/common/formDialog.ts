import { Dialog, ReactWidget } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';

/**
 * What a form dialog is made of: its title, body and labels; the buttons are Cancel,
 * `extraButtons`, then the OK button labelled `submitLabel`, and the dialog has a
 * close button.
 */
export interface IFormDialogOptions<T> extends Omit<
  Partial<Dialog.IOptions<T>>,
  'buttons' | 'hasClose'
> {
  trans: TranslationBundle;
  /**
   * The OK button's label (Submit, Save, Run).
   */
  submitLabel: string;
  /**
   * Buttons between Cancel and OK that neither send nor close (Save as Template).
   */
  extraButtons?: Dialog.IButton[];
}

/**
 * What the Run as Job, notification settings and pipeline dialogs share: the OK
 * button (class `jp-JupyterToJob-submit`) sends the form and closes the dialog only
 * once the server took it; Cancel and the close button close it at once.
 */
export abstract class FormDialog<T> extends Dialog<T> {
  constructor(options: IFormDialogOptions<T>) {
    const { trans, submitLabel, extraButtons, ...dialog } = options;
    const buttons = [
      Dialog.cancelButton({ label: trans.__('Cancel') }),
      ...(extraButtons ?? []),
      Dialog.okButton({
        label: submitLabel,
        className: 'jp-JupyterToJob-submit'
      })
    ];
    super({ ...dialog, buttons, hasClose: true });
    this.addClass('jp-JupyterToJob-dialog');
    // (the stylesheet lets it take the window's height, not JupyterLab's 500px)
    this.node
      .querySelector('.jp-Dialog-content')
      ?.classList.add('jp-JupyterToJob-dialogContent');
    this._buttonList = buttons;
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

/**
 * The body of a form dialog: a React form drawn from the dialog's options, holding
 * what the dialog resolves with (`getValue`).
 */
export abstract class FormBody<TOptions, TValue> extends ReactWidget {
  constructor(options: TOptions) {
    super();
    this.addClass('jp-JupyterToJob-formBody');
    this.options = options;
  }

  /**
   * What the dialog resolves with: what the server made or saved, or null.
   */
  abstract getValue(): TValue;

  protected readonly options: TOptions;
}
