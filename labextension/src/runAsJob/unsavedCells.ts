/**
 * Whether an open notebook has changes a job would miss: its cells (type, source and
 * tags) differ from the file as saved. JupyterLab also marks a notebook changed when it
 * only opened it and its kernel wrote the notebook's language_info, which a job does
 * not need saved first.
 */

/**
 * A cell as far as a job runs it.
 */
interface ICellAsRun {
  cell_type: unknown;
  source: string;
  tags: unknown[];
}

function asRun(cell: unknown): ICellAsRun {
  const data = (cell ?? {}) as {
    cell_type?: unknown;
    source?: unknown;
    metadata?: { tags?: unknown };
  };
  const source = Array.isArray(data.source)
    ? data.source.join('')
    : String(data.source ?? '');
  const tags = Array.isArray(data.metadata?.tags) ? data.metadata.tags : [];
  return { cell_type: data.cell_type, source, tags };
}

/**
 * True when `current` cells run differently from the `saved` ones.
 */
export function cellsDiffer(saved: unknown, current: unknown): boolean {
  const before = Array.isArray(saved) ? saved.map(asRun) : [];
  const now = Array.isArray(current) ? current.map(asRun) : [];
  return JSON.stringify(before) !== JSON.stringify(now);
}

/**
 * An open notebook as far as `hasUnsavedCells` reads it (a NotebookPanel).
 */
export interface IOpenNotebookPanel {
  context: {
    path: string;
    model: { dirty: boolean; toJSON(): unknown };
  };
}

/**
 * Reads a saved notebook (the contents manager).
 */
export interface INotebookReader {
  get(
    path: string,
    options: { content: boolean; type: 'notebook' }
  ): Promise<{ content: unknown }>;
}

/**
 * True when `panel` has changes its job would miss: JupyterLab calls it changed and its
 * cells differ from the file as saved. When the file cannot be read, it says changed
 * (saving first is the safe answer).
 */
export async function hasUnsavedCells(
  panel: IOpenNotebookPanel,
  contents: INotebookReader
): Promise<boolean> {
  const { model, path } = panel.context;
  if (!model.dirty) {
    return false;
  }
  try {
    const file = await contents.get(path, { content: true, type: 'notebook' });
    const saved = (file.content as { cells?: unknown } | null)?.cells;
    const current = (model.toJSON() as { cells?: unknown } | null)?.cells;
    return cellsDiffer(saved, current);
  } catch {
    return true;
  }
}
