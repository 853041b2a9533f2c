/**
 * The TypeScript pipeline models against the Python ones (jupyter_to_job/pipelines.py):
 * every `I*` interface of src/pipelineModels.ts has exactly the fields of its pydantic
 * model, in order, so that the Pipelines tab and the builder cannot drift from the API.
 */
import { pythonSchemas, typescriptInterfaces } from './wireModels';

describe('the TypeScript pipeline models mirror the Python ones', () => {
  const interfaces = typescriptInterfaces('pipelineModels.ts');
  const schemas = pythonSchemas(
    'jupyter_to_job.pipelines',
    Object.keys(interfaces)
  );

  it('mirrors the pipeline API’s models', () => {
    expect(Object.keys(interfaces).sort()).toEqual([
      'CreatePipeline',
      'DescribePipeline',
      'DescribePipelineJob',
      'DescribeStage',
      'ListPipelinesResponse',
      'PipelineJob',
      'PipelineStage',
      'UpdatePipeline'
    ]);
  });

  it.each(Object.keys(interfaces))(
    'I%s has the fields of the Python model, in order',
    model => {
      expect(interfaces[model]).toEqual(
        Object.keys(schemas[model]?.properties ?? {})
      );
    }
  );
});
