import { JobsAPI } from '../common/api';
import { ItemListModel } from '../common/pollingModel';
import { ISchedule } from './scheduleModels';

/**
 * How the Schedules tab's model polls.
 */
export interface ISchedulesModelOptions {
  api: Pick<JobsAPI, 'listSchedules' | 'setScheduleStatus' | 'deleteSchedule'>;
  /**
   * Milliseconds between refreshes while the tab is shown (default 15000): a schedule
   * changes at its slots, not by the second.
   */
  refreshInterval?: number;
}

/**
 * The state of the Schedules tab: the user's schedules, the one to bring into view,
 * and the last action's sentence (a failed pause, resume or delete). It refreshes
 * only while the tab is shown.
 */
export class SchedulesModel extends ItemListModel<ISchedule> {
  constructor(options: ISchedulesModelOptions) {
    super({
      name: '@campus-gpu-hub/jupyter-to-job:schedules',
      interval: options.refreshInterval ?? 15000
    });
    this.api = options.api;
  }

  readonly api: ISchedulesModelOptions['api'];

  /**
   * The user's schedules, newest first.
   */
  get schedules(): readonly ISchedule[] {
    return this.items;
  }

  pause(schedule: ISchedule): Promise<void> {
    return this.actOn(schedule, async () => {
      this.replace(
        await this.api.setScheduleStatus(schedule.schedule_id, 'PAUSED')
      );
    });
  }

  resume(schedule: ISchedule): Promise<void> {
    return this.actOn(schedule, async () => {
      this.replace(
        await this.api.setScheduleStatus(schedule.schedule_id, 'ACTIVE')
      );
    });
  }

  /**
   * Delete a schedule (the jobs it started stay).
   */
  remove(schedule: ISchedule): Promise<void> {
    return this.actOn(schedule, async () => {
      await this.api.deleteSchedule(schedule.schedule_id);
      this.drop(schedule);
    });
  }

  protected idOf(schedule: ISchedule): string {
    return schedule.schedule_id;
  }

  protected list(): Promise<ISchedule[]> {
    return this.api.listSchedules();
  }
}
