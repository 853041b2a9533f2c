import { featuresOf, JobsAPI } from '../common/api';
import { askToSaveFirst } from '../common/questions';
import {
  PipelineBuilderDialog,
  PipelineBuilderResult
} from './pipelineBuilder';
import { IDescribePipeline } from './pipelineModels';
import { PipelineTemplateDialog } from './pipelineTemplateDialog';
import { IRunContext, reachJobService } from '../runAsJob/runContext';
import { isJobOutput } from '../runAsJob/submission';

/**
 * An open notebook, as the builder lists it.
 */
export interface IOpenNotebook {
  /**
   * As the document manager names it (a drive prefix is dropped for the server).
   */
  path: string;
  dirty: boolean;
  save(): Promise<void>;
}

/**
 * Open the pipeline builder over the open notebooks: check that the server offers
 * Run as Job, have unsaved notebooks saved (jobs run them as saved), then show it.
 *
 * @returns The pipeline made (or the schedule that repeats it); null when cancelled
 * or not available (a notification says why).
 */
export async function runPipelineBuilder(
  context: IRunContext,
  notebooks: IOpenNotebook[]
): Promise<PipelineBuilderResult | null> {
  const { docManager, trans } = context;
  const service = await reachJobService(context);
  if (!service) {
    return null;
  }
  const { api, config } = service;
  // The executed notebooks of jobs are results, not stages: neither offered nor saved.
  const stages = notebooks
    .map(notebook => ({
      ...notebook,
      local: docManager.services.contents.localPath(notebook.path)
    }))
    .filter(notebook => !isJobOutput(notebook.local));
  const dirty = stages.filter(notebook => notebook.dirty);
  if (dirty.length > 0) {
    const saving = await askToSaveFirst(
      trans,
      trans.__('Save the notebooks first?'),
      trans.__(
        'A pipeline runs the notebooks as saved, and these have unsaved changes: %1.',
        dirty.map(notebook => notebook.path.split('/').pop()).join(', ')
      )
    );
    if (!saving) {
      return null;
    }
    await Promise.all(dirty.map(notebook => notebook.save()));
  }
  const dialog = new PipelineBuilderDialog({
    api,
    notebooks: stages.map(notebook => notebook.local),
    features: featuresOf(config),
    trans
  });
  const result = await dialog.launch();
  return result.button.accept ? result.value : null;
}

/**
 * Run the template at `path` again, with its pipeline-wide parameters to change.
 */
export async function runPipelineTemplate(
  context: IRunContext,
  path: string
): Promise<IDescribePipeline | null> {
  const dialog = new PipelineTemplateDialog({
    api: new JobsAPI(context.serverSettings),
    path: context.docManager.services.contents.localPath(path),
    trans: context.trans
  });
  const result = await dialog.launch();
  return result.button.accept ? result.value : null;
}
