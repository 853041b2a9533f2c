import { INotebookParameter, JsonValue } from '../common/models';
import {
  ICreatePipeline,
  IDescribePipeline,
  IDescribePipelineJob
} from '../pipelines/pipelineModels';

/**
 * The notebooks open in the builder scenarios, in the order they opened.
 */
export const OPEN_NOTEBOOKS = [
  'course/prepare.ipynb',
  'course/train.ipynb',
  'course/eval.ipynb'
];

/**
 * The one parameter train.ipynb declares.
 */
export const EPOCHS: INotebookParameter = {
  name: 'epochs',
  inferred_type_name: 'int',
  default: '3',
  help: ''
};

/**
 * The builder scenarios' "nightly" request: prepare alone, then the stage `stage`
 * running train (on `trainFlavor`, with 10 epochs) and eval side by side; prepare
 * and eval on the default flavor; `parameters` pipeline-wide.
 */
export function nightlyRequest(
  stage: string,
  trainFlavor: string,
  parameters: { [name: string]: JsonValue }
): ICreatePipeline {
  return {
    name: 'nightly',
    stages: [
      {
        name: '1-prepare',
        jobs: [
          {
            input_path: 'course/prepare.ipynb',
            flavor: 'quarter-4090',
            parameters: {}
          }
        ]
      },
      {
        name: stage,
        jobs: [
          {
            input_path: 'course/train.ipynb',
            flavor: trainFlavor,
            parameters: { epochs: 10 }
          },
          {
            input_path: 'course/eval.ipynb',
            flavor: 'quarter-4090',
            parameters: {}
          }
        ]
      }
    ],
    parameters
  };
}

/**
 * A job of a pipeline, with `overrides` on top of a completed one.
 */
export function makePipelineJob(
  overrides: Partial<IDescribePipelineJob> = {}
): IDescribePipelineJob {
  return {
    input_path: 'course/prepare.ipynb',
    name: null,
    flavor: 'cpu',
    flavor_title: 'CPU job',
    parameters: {},
    job_id: 'job-prepare',
    status: 'COMPLETED',
    status_message: null,
    error: null,
    cells_completed: 4,
    cells_total: 4,
    ...overrides
  };
}

/**
 * The acceptance scene, as the API describes it: stage 2's 'eval-b' failed in cell 3,
 * so 'eval-a' beside it was stopped and stage 3 was skipped.
 */
export function makeFailedPipeline(
  overrides: Partial<IDescribePipeline> = {}
): IDescribePipeline {
  return {
    pipeline_id: 'pipe-1',
    owner: 'student1',
    name: 'train and evaluate',
    status: 'FAILED',
    status_message:
      "Stage 'evaluate' failed: 'eval-b.ipynb' failed in cell 3 (ValueError: bad split). The rest was stopped or skipped.",
    create_time: '2026-11-25T10:00:00Z',
    update_time: '2026-11-25T10:05:00Z',
    end_time: '2026-11-25T10:05:00Z',
    parameters: { epochs: 2 },
    shared_folder: 'pipelines/train-and-evaluate',
    template_path: null,
    current_stage: null,
    stages: [
      {
        name: 'prepare',
        status: 'COMPLETED',
        status_message: null,
        jobs: [makePipelineJob()]
      },
      {
        name: 'evaluate',
        status: 'FAILED',
        status_message: null,
        jobs: [
          makePipelineJob({
            input_path: 'course/eval-a.ipynb',
            job_id: 'job-eval-a',
            status: 'STOPPED',
            status_message:
              "Stopped because 'eval-b.ipynb' of stage 'evaluate' failed.",
            cells_completed: 1,
            cells_total: 5
          }),
          makePipelineJob({
            input_path: 'course/eval-b.ipynb',
            job_id: 'job-eval-b',
            status: 'FAILED',
            error: {
              cell_index: 2,
              ename: 'ValueError',
              evalue: 'bad split',
              traceback: ''
            },
            cells_completed: 2,
            cells_total: 5
          })
        ]
      },
      {
        name: 'report',
        status: 'SKIPPED',
        status_message: null,
        jobs: [
          makePipelineJob({
            input_path: 'course/report.ipynb',
            job_id: null,
            status: 'SKIPPED',
            status_message:
              "Skipped because 'eval-b.ipynb' of stage 'evaluate' failed."
          })
        ]
      }
    ],
    own: true,
    can_stop: false,
    can_delete: true,
    can_rerun: true,
    ...overrides
  };
}
