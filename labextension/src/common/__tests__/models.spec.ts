/**
 * The TypeScript wire models against the Python ones: every `I*` interface of
 * src/models.ts has exactly the fields of its pydantic model (`json_schemas()` in
 * jupyter_to_job/models.py), so the two cannot drift apart unnoticed.
 */
import { JOB_STATUSES } from '../models';
import { pythonJSON, typescriptInterfaces } from '../../__tests__/wireModels';

interface ISchema {
  properties?: { [field: string]: unknown };
  enum?: string[];
}

function pythonSchemas(): { [model: string]: ISchema } {
  return pythonJSON(
    'import json; from jupyter_to_job.models import json_schemas; print(json.dumps(json_schemas()))'
  );
}

describe('the TypeScript wire models mirror the Python ones', () => {
  const schemas = pythonSchemas();
  const interfaces = typescriptInterfaces('common/models.ts');

  it('has an interface for every wire model, and no other', () => {
    const models = Object.keys(schemas).filter(name => name !== 'JobStatus');
    expect(Object.keys(interfaces).sort()).toEqual(models.sort());
  });

  it.each(Object.keys(interfaces))(
    'I%s has the fields of the Python model, in order',
    model => {
      expect(interfaces[model]).toEqual(
        Object.keys(schemas[model]?.properties ?? {})
      );
    }
  );

  it('lists the statuses of JobStatus, in order', () => {
    expect([...JOB_STATUSES]).toEqual(schemas.JobStatus.enum);
  });
});
