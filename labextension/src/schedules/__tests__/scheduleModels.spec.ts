/**
 * The TypeScript schedule models against the Python ones
 * (jupyter_to_job/schedules/models.py): every `I*` interface of
 * src/schedules/scheduleModels.ts has exactly the fields of its pydantic model, in order,
 * so that the Schedules tab and the dialog cannot drift from the API.
 */
import { itMirrorsPythonModels } from '../../__tests__/wireModels';

describe('the TypeScript schedule models mirror the Python ones', () => {
  itMirrorsPythonModels(
    'schedules/scheduleModels.ts',
    'jupyter_to_job.schedules',
    'schedule',
    [
      'CreateSchedule',
      'ListSchedulesResponse',
      'Schedule',
      'ScheduleRun',
      'ScheduleWindow',
      'UpdateSchedule'
    ]
  );
});
