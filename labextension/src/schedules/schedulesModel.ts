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
export class SchedulesModel extends ItemListModel<
  ISchedule,
  ISchedulesModelOptions['api']
> {
  constructor(options: ISchedulesModelOptions) {
    super(options, {
      name: 'schedules',
      interval: 15000,
      idKey: 'schedule_id'
    });
  }

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

  protected list(): Promise<ISchedule[]> {
    return this.api.listSchedules();
  }

  /**
   * Delete a schedule (the jobs it started stay).
   */
  protected erase(schedule: ISchedule): Promise<void> {
    return this.api.deleteSchedule(schedule.schedule_id);
  }
}
