import { cellsDiffer, hasUnsavedCells } from '../unsavedCells';

const saved = [
  {
    cell_type: 'code',
    source: ['subject = "page"\n', 'repeat = 3'],
    metadata: { tags: ['parameters'] },
    outputs: []
  },
  { cell_type: 'code', source: 'print(subject)', metadata: {}, outputs: [] }
];

describe('cellsDiffer, whether a pipeline must save a notebook first', () => {
  it('is false for a notebook only opened (ids added, lines joined, cells run)', () => {
    const opened = [
      {
        id: 'a1',
        cell_type: 'code',
        source: 'subject = "page"\nrepeat = 3',
        metadata: { tags: ['parameters'] },
        outputs: [],
        execution_count: null
      },
      {
        id: 'b2',
        cell_type: 'code',
        source: 'print(subject)',
        metadata: { scrolled: true },
        outputs: [{ output_type: 'stream', name: 'stdout', text: 'page\n' }],
        execution_count: 1
      }
    ];
    expect(cellsDiffer(saved, opened)).toBe(false);
  });

  it('is true for an edited source, a changed tag or a cell added', () => {
    const edited = [saved[0], { ...saved[1], source: 'print(subject * 2)' }];
    expect(cellsDiffer(saved, edited)).toBe(true);
    const untagged = [{ ...saved[0], metadata: {} }, saved[1]];
    expect(cellsDiffer(saved, untagged)).toBe(true);
    expect(cellsDiffer(saved, [...saved, saved[1]])).toBe(true);
  });
});

describe('hasUnsavedCells, for an open notebook', () => {
  const reader = (cells: unknown[]) => ({
    get: async () => ({ content: { cells } })
  });
  const panel = (dirty: boolean, cells: unknown[]) => ({
    context: {
      path: 'loop.ipynb',
      model: { dirty, toJSON: () => ({ cells, metadata: {} }) }
    }
  });

  it('is false when JupyterLab marked it changed but its cells are as saved', async () => {
    expect(await hasUnsavedCells(panel(true, saved), reader(saved))).toBe(
      false
    );
  });

  it('is true when a cell was edited, and false when nothing changed', async () => {
    const edited = [saved[0], { ...saved[1], source: 'print(1)' }];
    expect(await hasUnsavedCells(panel(true, edited), reader(saved))).toBe(
      true
    );
    expect(await hasUnsavedCells(panel(false, edited), reader(saved))).toBe(
      false
    );
  });

  it('says changed when the saved file cannot be read', async () => {
    const failing = {
      get: async () => {
        throw new Error('gone');
      }
    };
    expect(await hasUnsavedCells(panel(true, saved), failing)).toBe(true);
  });
});
