/**
 * The pipeline builder's state, as plain values: the open notebooks arranged into
 * stages (several in a stage run in parallel), each with its flavor and parameter
 * texts, the pipeline-wide parameters, and the create request it makes.
 */
import { INotebookParameter, JsonValue } from '../common/models';
import { ICreatePipeline, IPipelineJob } from './pipelineModels';
import { changedParameters, editableText } from '../runAsJob/parameters';
import { notebookStem } from '../runAsJob/submission';

/**
 * The most stages and jobs per stage the service takes.
 */
export const MAX_STAGES = 10;
export const MAX_JOBS_PER_STAGE = 10;

/**
 * One notebook of the pipeline.
 */
export interface IDraftJob {
  /**
   * The notebook, relative to the server root; unique in a draft.
   */
  path: string;
  /**
   * The flavor picked; null: the default.
   */
  flavor: string | null;
  /**
   * What each parameter box holds; missing: the notebook's default.
   */
  texts: { [name: string]: string };
}

/**
 * One stage: its name and its notebooks, run in parallel.
 */
export interface IDraftStage {
  name: string;
  jobs: IDraftJob[];
}

/**
 * A pipeline-wide parameter as typed: a name and a value (read as JSON when it can
 * be, else as text).
 */
export interface IDraftParameter {
  name: string;
  value: string;
}

/**
 * Everything the builder holds.
 */
export interface IPipelineDraft {
  name: string;
  stages: IDraftStage[];
  /**
   * Open notebooks left out of the pipeline.
   */
  unused: string[];
  parameters: IDraftParameter[];
}

/**
 * The builder as it opens: the open notebooks one per stage, in the order given
 * (the usual chain: prepare, then train, then evaluate).
 */
export function initialDraft(paths: readonly string[]): IPipelineDraft {
  const unique = [...new Set(paths)].slice(0, MAX_STAGES);
  return {
    name: unique.length ? `${notebookStem(unique[0])} pipeline` : 'pipeline',
    stages: unique.map((path, index) => ({
      name: stageName(path, index),
      jobs: [{ path, flavor: null, texts: {} }]
    })),
    unused: [...new Set(paths)].slice(MAX_STAGES),
    parameters: []
  };
}

/**
 * A stage's name: "1-prepare" from the notebook it starts with.
 */
function stageName(path: string, index: number): string {
  return `${index + 1}-${notebookStem(path)}`.slice(0, 100);
}

/**
 * Where a notebook is: its stage index, or -1 when it is left out.
 */
export function stageOf(draft: IPipelineDraft, path: string): number {
  return draft.stages.findIndex(stage =>
    stage.jobs.some(job => job.path === path)
  );
}

/**
 * The draft with `path` moved to stage `to` (-1: left out); its flavor and
 * parameters go with it. Stages left empty are removed.
 */
export function moveNotebook(
  draft: IPipelineDraft,
  path: string,
  to: number
): IPipelineDraft {
  const from = stageOf(draft, path);
  const job =
    from >= 0 ? findJob(draft, path)! : { path, flavor: null, texts: {} };
  if (from === to) {
    return draft;
  }
  let stages = draft.stages.map((stage, index) =>
    index === from
      ? { ...stage, jobs: stage.jobs.filter(item => item.path !== path) }
      : stage
  );
  if (to >= 0) {
    stages = stages.map((stage, index) =>
      index === to ? { ...stage, jobs: [...stage.jobs, job] } : stage
    );
  }
  const unused = draft.unused.filter(item => item !== path);
  return {
    ...draft,
    stages: stages.filter(stage => stage.jobs.length > 0),
    unused: to < 0 ? [...unused, path] : unused
  };
}

/**
 * The draft with a new, last stage holding `path` (taken from where it was).
 */
export function moveToNewStage(
  draft: IPipelineDraft,
  path: string
): IPipelineDraft {
  const withStage: IPipelineDraft = {
    ...draft,
    stages: [
      ...draft.stages,
      { name: stageName(path, draft.stages.length), jobs: [] }
    ]
  };
  // moveNotebook drops empty stages: the new one is filled in the same step.
  const from = stageOf(withStage, path);
  const job =
    from >= 0 ? findJob(withStage, path)! : { path, flavor: null, texts: {} };
  const last = withStage.stages.length - 1;
  const stages = withStage.stages.map((stage, index) => {
    if (index === last) {
      return { ...stage, jobs: [job] };
    }
    return index === from
      ? { ...stage, jobs: stage.jobs.filter(item => item.path !== path) }
      : stage;
  });
  return {
    ...withStage,
    stages: stages.filter(stage => stage.jobs.length > 0),
    unused: withStage.unused.filter(item => item !== path)
  };
}

/**
 * The draft with one job changed.
 */
export function updateJob(
  draft: IPipelineDraft,
  path: string,
  changes: Partial<Omit<IDraftJob, 'path'>>
): IPipelineDraft {
  return {
    ...draft,
    stages: draft.stages.map(stage => ({
      ...stage,
      jobs: stage.jobs.map(job =>
        job.path === path ? { ...job, ...changes } : job
      )
    }))
  };
}

/**
 * The draft with stage `index` renamed.
 */
export function renameStage(
  draft: IPipelineDraft,
  index: number,
  name: string
): IPipelineDraft {
  return {
    ...draft,
    stages: draft.stages.map((stage, at) =>
      at === index ? { ...stage, name } : stage
    )
  };
}

/**
 * The job of `path`, if it is in a stage.
 */
export function findJob(draft: IPipelineDraft, path: string): IDraftJob | null {
  for (const stage of draft.stages) {
    const job = stage.jobs.find(item => item.path === path);
    if (job) {
      return job;
    }
  }
  return null;
}

/**
 * A pipeline-wide value as typed: JSON when it reads as JSON (`3`, `true`,
 * `[1, 2]`, `"x"`), else the text itself.
 */
export function wideValue(text: string): JsonValue {
  const trimmed = text.trim();
  try {
    return JSON.parse(trimmed) as JsonValue;
  } catch {
    return text;
  }
}

/**
 * The pipeline-wide parameters as a wire dict (rows without a name are left out).
 */
export function wideParameters(rows: readonly IDraftParameter[]): {
  [name: string]: JsonValue;
} {
  const values: { [name: string]: JsonValue } = {};
  for (const row of rows) {
    const name = row.name.trim();
    if (name) {
      values[name] = wideValue(row.value);
    }
  }
  return values;
}

/**
 * The pipeline-wide rows for a template's values (the template rerun dialog).
 */
export function parameterRows(values: {
  [name: string]: JsonValue;
}): IDraftParameter[] {
  return Object.entries(values ?? {}).map(([name, value]) => ({
    name,
    value: typeof value === 'string' ? value : JSON.stringify(value)
  }));
}

/**
 * The create request of a draft, or the sentences saying what must change first.
 *
 * @param parametersOf The parameters read from each notebook (null: still reading),
 * to turn the typed texts into typed values (only values that differ from the
 * notebook's defaults are sent).
 * @param defaultFlavorId The flavor of jobs whose flavor was not picked (the one
 * the builder shows as selected).
 */
export function pipelineRequest(
  draft: IPipelineDraft,
  parametersOf: (path: string) => INotebookParameter[] | null,
  defaultFlavorId: string | null = null
): { ok: true; request: ICreatePipeline } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  if (!draft.name.trim()) {
    problems.push('Give the pipeline a name.');
  }
  if (draft.stages.length === 0) {
    problems.push('Put at least one notebook into a stage.');
  }
  if (draft.stages.length > MAX_STAGES) {
    problems.push(`A pipeline has at most ${MAX_STAGES} stages.`);
  }
  const names = new Set<string>();
  const stages = draft.stages.map((stage, index) => {
    const name = stage.name.trim();
    if (!name) {
      problems.push(`Give stage ${index + 1} a name.`);
    } else if (names.has(name)) {
      problems.push(`Two stages are named “${name}”; give each its own name.`);
    }
    names.add(name);
    if (stage.jobs.length > MAX_JOBS_PER_STAGE) {
      problems.push(
        `Stage “${name}” has ${stage.jobs.length} notebooks; a stage runs at most ${MAX_JOBS_PER_STAGE}.`
      );
    }
    return {
      name,
      jobs: stage.jobs.map(job => {
        const parameters = parametersOf(job.path);
        const request: IPipelineJob = {
          input_path: job.path,
          flavor: job.flavor ?? defaultFlavorId
        };
        if (parameters === null) {
          problems.push(
            `The parameters of ${job.path} are still being read; run again in a moment.`
          );
          return request;
        }
        const changed = changedParameters(parameters, {
          ...defaultTexts(parameters),
          ...job.texts
        });
        if (Object.keys(changed.problems).length > 0) {
          problems.push(
            `Some parameters of ${job.path} cannot be read; correct the marked boxes.`
          );
        }
        request.parameters = changed.values;
        return request;
      })
    };
  });
  if (problems.length > 0) {
    return { ok: false, problems };
  }
  return {
    ok: true,
    request: {
      name: draft.name.trim(),
      stages,
      parameters: wideParameters(draft.parameters)
    }
  };
}

/**
 * The boxes of a notebook's parameters as they open: each default, editable.
 */
export function defaultTexts(parameters: readonly INotebookParameter[]): {
  [name: string]: string;
} {
  const texts: { [name: string]: string } = {};
  for (const parameter of parameters) {
    texts[parameter.name] = editableText(parameter);
  }
  return texts;
}

/**
 * Where a template of `name` is saved by default: beside the first notebook,
 * "course/train-and-evaluate.pipeline.yaml".
 */
export function defaultTemplatePath(draft: IPipelineDraft): string {
  const first = draft.stages[0]?.jobs[0]?.path ?? '';
  const folder = first.includes('/')
    ? first.slice(0, first.lastIndexOf('/') + 1)
    : '';
  const slug =
    draft.name
      .toLowerCase()
      .replace(/[^a-z0-9_-]+/g, '-')
      .replace(/^[-_]+|[-_]+$/g, '')
      .slice(0, 64) || 'pipeline';
  return `${folder}${slug}.pipeline.yaml`;
}

/**
 * True for a file name the server reads as a pipeline template.
 */
export function isTemplatePath(path: string): boolean {
  return /\.pipeline\.(ya?ml|json)$/i.test(path);
}
