/**
 * The pipeline builder's arrangement of the open notebooks into stages, and the
 * create request it makes.
 */
import {
  defaultTemplatePath,
  initialDraft,
  isTemplatePath,
  moveNotebook,
  moveToNewStage,
  parameterRows,
  pipelineRequest,
  renameStage,
  updateJob,
  wideParameters
} from '../pipelineDraft';
import {
  EPOCHS,
  nightlyRequest,
  OPEN_NOTEBOOKS
} from '../../__tests__/pipelines.fixture';

describe('arranging the open notebooks into stages', () => {
  it('starts with one stage per notebook, in the order they opened', () => {
    const draft = initialDraft(OPEN_NOTEBOOKS);
    expect(draft.name).toBe('prepare pipeline');
    expect(
      draft.stages.map(stage => [stage.name, stage.jobs.map(job => job.path)])
    ).toEqual([
      ['1-prepare', ['course/prepare.ipynb']],
      ['2-train', ['course/train.ipynb']],
      ['3-eval', ['course/eval.ipynb']]
    ]);
  });

  it('runs two notebooks side by side once one is moved into the other’s stage, keeping its settings', () => {
    // Given eval has its own flavor
    let draft = updateJob(initialDraft(OPEN_NOTEBOOKS), 'course/eval.ipynb', {
      flavor: 'cpu'
    });
    // When eval moves into stage 2 (train's)
    draft = moveNotebook(draft, 'course/eval.ipynb', 1);
    // Then stage 2 runs both, the emptied stage is gone, and eval keeps its flavor
    expect(draft.stages.map(stage => stage.jobs.map(job => job.path))).toEqual([
      ['course/prepare.ipynb'],
      ['course/train.ipynb', 'course/eval.ipynb']
    ]);
    expect(draft.stages[1].jobs[1].flavor).toBe('cpu');
  });

  it('leaves a notebook out, puts it back into a new last stage', () => {
    let draft = moveNotebook(
      initialDraft(OPEN_NOTEBOOKS),
      'course/prepare.ipynb',
      -1
    );
    expect(draft.unused).toEqual(['course/prepare.ipynb']);
    expect(draft.stages).toHaveLength(2);
    draft = moveToNewStage(draft, 'course/prepare.ipynb');
    expect(draft.unused).toEqual([]);
    expect(draft.stages.map(stage => stage.jobs[0].path)).toEqual([
      'course/train.ipynb',
      'course/eval.ipynb',
      'course/prepare.ipynb'
    ]);
  });
});

describe('the pipeline request of the builder', () => {
  it('sends each job with its flavor (the default where none was picked) and changed parameters, and the pipeline-wide values', () => {
    let draft = moveNotebook(
      initialDraft(OPEN_NOTEBOOKS),
      'course/eval.ipynb',
      1
    );
    draft = updateJob(draft, 'course/train.ipynb', {
      flavor: 'whole-gpu',
      texts: { epochs: '10' }
    });
    draft = renameStage(draft, 1, 'train');
    draft = {
      ...draft,
      name: 'nightly',
      parameters: [
        { name: 'seed', value: '42' },
        { name: 'note', value: 'first try' },
        { name: '', value: 'ignored' }
      ]
    };

    const result = pipelineRequest(draft, () => [EPOCHS], 'quarter-4090');

    expect(result).toEqual({
      ok: true,
      request: nightlyRequest('train', 'whole-gpu', {
        seed: 42,
        note: 'first try'
      })
    });
  });

  it('says what must change first: a parameter that cannot be read, two stages of one name', () => {
    let draft = updateJob(initialDraft(OPEN_NOTEBOOKS), 'course/train.ipynb', {
      texts: { epochs: 'many' }
    });
    draft = renameStage(draft, 2, '2-train');
    const result = pipelineRequest(draft, () => [EPOCHS]);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.problems).toEqual([
      'Some parameters of course/train.ipynb cannot be read; correct the marked boxes.',
      'Two stages are named “2-train”; give each its own name.'
    ]);
  });

  it('waits for the notebooks’ parameters before it sends anything', () => {
    const result = pipelineRequest(initialDraft(OPEN_NOTEBOOKS), () => null);
    expect(result.ok).toBe(false);
  });
});

describe('templates', () => {
  it('are saved beside the first notebook, named after the pipeline', () => {
    const draft = {
      ...initialDraft(OPEN_NOTEBOOKS),
      name: 'Train & Evaluate!'
    };
    expect(defaultTemplatePath(draft)).toBe(
      'course/train-evaluate.pipeline.yaml'
    );
    expect(isTemplatePath('course/a.pipeline.yaml')).toBe(true);
    expect(isTemplatePath('course/a.pipeline.json')).toBe(true);
    expect(isTemplatePath('course/a.yaml')).toBe(false);
  });

  it('show their pipeline-wide values as text, and send them back typed', () => {
    const rows = parameterRows({
      epochs: 3,
      optimizer: 'adam',
      layers: [1, 2]
    });
    expect(rows).toEqual([
      { name: 'epochs', value: '3' },
      { name: 'optimizer', value: 'adam' },
      { name: 'layers', value: '[1,2]' }
    ]);
    expect(wideParameters(rows)).toEqual({
      epochs: 3,
      optimizer: 'adam',
      layers: [1, 2]
    });
  });
});
