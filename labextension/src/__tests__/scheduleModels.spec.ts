/**
 * The TypeScript schedule models against the Python ones (jupyter_to_job/schedules.py):
 * every `I*` interface of src/scheduleModels.ts has exactly the fields of its pydantic
 * model, in order, so that the Schedules tab and the dialog cannot drift from the API.
 */
import { pythonSchemas, typescriptInterfaces } from './wireModels';

describe('the TypeScript schedule models mirror the Python ones', () => {
  const interfaces = typescriptInterfaces('scheduleModels.ts');
  const schemas = pythonSchemas(
    'jupyter_to_job.schedules',
    Object.keys(interfaces)
  );

  it('mirrors the schedule API’s models', () => {
    expect(Object.keys(interfaces).sort()).toEqual([
      'CreateSchedule',
      'ListSchedulesResponse',
      'Schedule',
      'ScheduleRun',
      'ScheduleWindow',
      'UpdateSchedule'
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
