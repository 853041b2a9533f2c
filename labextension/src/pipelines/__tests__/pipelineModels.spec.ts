/**
 * The TypeScript pipeline models against the Python ones
 * (jupyter_to_job/pipelines/models.py): every `I*` interface of
 * src/pipelines/pipelineModels.ts has exactly the fields of its pydantic model, in order,
 * so that the Pipelines tab and the builder cannot drift from the API.
 */
import { itMirrorsPythonModels } from '../../__tests__/wireModels';

describe('the TypeScript pipeline models mirror the Python ones', () => {
  itMirrorsPythonModels(
    'pipelines/pipelineModels.ts',
    'jupyter_to_job.pipelines',
    'pipeline',
    [
      'CreatePipeline',
      'DescribePipeline',
      'DescribePipelineJob',
      'DescribeStage',
      'ListPipelinesResponse',
      'PipelineJob',
      'PipelineStage',
      'UpdatePipeline'
    ]
  );
});
