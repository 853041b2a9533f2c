/**
 * The Schedules tab of the Jobs panel as rendered: each schedule in words, the buttons
 * its status allows, Delete after a confirmation, and the last runs' links to their jobs.
 */
import { Dialog } from '@jupyterlab/apputils';
import { act } from 'react';

import { JobsAPI } from '../../common/api';
import { ISchedule } from '../scheduleModels';
import { SchedulesModel } from '../schedulesModel';
import { makeJob } from '../../__tests__/jobs.fixture';
import {
  emptyLog,
  openPanelTab,
  settle,
  shownJob
} from '../../__tests__/jobsPanel.fixture';

(globalThis as any).IS_REACT_ACT_ENVIRONMENT = true;

function makeSchedule(overrides: Partial<ISchedule> = {}): ISchedule {
  return {
    job: {
      input_path: 'course/train.ipynb',
      name: 'train',
      flavor: 'quarter-4090',
      parameters: {}
    },
    name: 'nightly training',
    cron: null,
    interval_seconds: 3600,
    timezone: 'Europe/Zurich',
    window: { start: '09:00:00', end: '17:00:00' },
    start_time: null,
    end_time: null,
    max_runs: 10,
    max_failures_in_a_row: 3,
    schedule_id: 'sched-1',
    owner: 'student1',
    flavor_title: 'A quarter RTX 4090',
    status: 'ACTIVE',
    status_message: null,
    runs: 2,
    failures_in_a_row: 0,
    last_slot_time: '2026-11-25T09:00:00Z',
    next_run_time: '2026-11-25T11:00:00Z',
    last_job_id: 'job-2',
    recent_runs: [
      {
        slot_time: '2026-11-25T10:00:00Z',
        job_id: 'job-2',
        outcome: 'FAILED',
        message: null
      },
      {
        slot_time: '2026-11-25T09:00:00Z',
        job_id: 'job-1',
        outcome: 'COMPLETED',
        message: null
      }
    ],
    create_time: '2026-11-25T08:30:00Z',
    update_time: '2026-11-25T10:00:00Z',
    ...overrides
  };
}

/**
 * A job API with these schedules (and jobs), recording what the panel asks.
 */
class FakeServer {
  constructor(public schedules: ISchedule[]) {}
  readonly calls: string[] = [];
  readonly jobs = [makeJob({ job_id: 'job-1' }), makeJob({ job_id: 'job-2' })];

  async listSchedules(): Promise<ISchedule[]> {
    return this.schedules;
  }
  async setScheduleStatus(id: string, status: ISchedule['status']) {
    this.calls.push(`${status} ${id}`);
    const changed = {
      ...this.schedules.find(item => item.schedule_id === id)!,
      status
    };
    this.schedules = this.schedules.map(item =>
      item.schedule_id === id ? changed : item
    );
    return changed;
  }
  async deleteSchedule(id: string): Promise<void> {
    this.calls.push(`DELETE ${id}`);
    this.schedules = this.schedules.filter(item => item.schedule_id !== id);
  }
  async listRecentJobs() {
    return { jobs: this.jobs, next_token: null, total_count: 2 };
  }
  async getLog(jobId: string, offset: number) {
    return emptyLog(jobId, offset);
  }
  get api(): JobsAPI {
    return this as unknown as JobsAPI;
  }
}

async function openSchedulesTab(server: FakeServer) {
  const panel = await openPanelTab(server.api, 'schedules', {
    schedules: new SchedulesModel({ api: server.api })
  });
  const card = (id: string) =>
    panel.node.querySelector<HTMLElement>(`[data-schedule-id="${id}"]`);
  const inCard = (id: string, testid: string) =>
    card(id)?.querySelector<HTMLElement>(`[data-testid="${testid}"]`) ?? null;
  return { panel, card, inCard };
}

afterEach(async () => {
  await act(async () => Dialog.flush());
  document.body.innerHTML = '';
});

describe('The Schedules tab of the Jobs panel', () => {
  it('shows each schedule in words, with only the buttons its status allows', async () => {
    // Given an active, a paused and an ended schedule
    const server = new FakeServer([
      makeSchedule(),
      makeSchedule({
        schedule_id: 'sched-2',
        name: 'weekday eval',
        cron: '0 9 * * 1-5',
        interval_seconds: null,
        window: null,
        status: 'PAUSED'
      }),
      makeSchedule({
        schedule_id: 'sched-3',
        status: 'ENDED',
        status_message:
          'This schedule ended: its runs failed 3 times in a row.',
        next_run_time: null
      })
    ]);
    const { panel, inCard } = await openSchedulesTab(server);

    // Then the active one reads as its rule, stops and status, and offers Pause and Delete
    expect(inCard('sched-1', 'schedule-rule')?.textContent).toBe(
      'Every hour, between 09:00 and 17:00 (Europe/Zurich)'
    );
    expect(inCard('sched-1', 'schedule-notebook')?.textContent).toBe(
      'course/train.ipynb'
    );
    expect(inCard('sched-1', 'schedule-stops')?.textContent).toBe(
      'At most 10 runs · ends after 3 failures in a row'
    );
    expect(inCard('sched-1', 'schedule-runs')?.textContent).toBe('2 of 10');
    // with its job's flavor by title, not by id
    expect(inCard('sched-1', 'schedule-flavor')?.textContent).toBe(
      'A quarter RTX 4090'
    );
    expect(inCard('sched-1', 'schedule-next-run')?.textContent).not.toBe('—');
    expect(inCard('sched-1', 'schedule-action-pause')).not.toBeNull();
    expect(inCard('sched-1', 'schedule-action-resume')).toBeNull();
    // And the paused one offers Resume, not Pause
    expect(inCard('sched-2', 'schedule-rule')?.textContent).toBe(
      'Weekdays at 09:00 (Europe/Zurich)'
    );
    expect(inCard('sched-2', 'schedule-action-pause')).toBeNull();
    expect(inCard('sched-2', 'schedule-action-resume')).not.toBeNull();
    expect(inCard('sched-2', 'schedule-next-run')?.textContent).toBe('—');
    // And the ended one says why, and can only be deleted
    expect(inCard('sched-3', 'schedule-status')?.textContent).toBe(
      'This schedule ended: its runs failed 3 times in a row.'
    );
    expect(inCard('sched-3', 'schedule-action-pause')).toBeNull();
    expect(inCard('sched-3', 'schedule-action-resume')).toBeNull();
    expect(inCard('sched-3', 'schedule-action-delete')).not.toBeNull();

    // When the student pauses the active one
    await settle(() => inCard('sched-1', 'schedule-action-pause')!.click());

    // Then the service is asked, and the card now offers Resume
    expect(server.calls).toEqual(['PAUSED sched-1']);
    expect(inCard('sched-1', 'schedule-action-resume')).not.toBeNull();
    expect(inCard('sched-1', 'schedule-action-pause')).toBeNull();
    act(() => panel.dispose());
  });

  it('asks before deleting a schedule, and deletes only once confirmed', async () => {
    const server = new FakeServer([makeSchedule()]);
    const { panel, card, inCard } = await openSchedulesTab(server);

    // When the student clicks Delete, then Keep it
    await settle(() => inCard('sched-1', 'schedule-action-delete')!.click());
    const dialog = document.querySelector('.jp-Dialog');
    expect(dialog?.textContent).toContain(
      'Delete the schedule “nightly training”?'
    );
    await settle(() =>
      document.querySelector<HTMLElement>('.jp-Dialog .jp-mod-reject')!.click()
    );
    // Then nothing is deleted
    expect(server.calls).toEqual([]);
    expect(card('sched-1')).not.toBeNull();

    // When they click Delete again and confirm
    await settle(() => inCard('sched-1', 'schedule-action-delete')!.click());
    await settle(() =>
      document.querySelector<HTMLElement>('.jp-Dialog .jp-mod-accept')!.click()
    );
    await settle();

    // Then it is deleted and leaves the list
    expect(server.calls).toEqual(['DELETE sched-1']);
    expect(card('sched-1')).toBeNull();
    expect(
      panel.node.querySelector('[data-testid="schedules-empty"]')
    ).not.toBeNull();
    act(() => panel.dispose());
  });

  it('links each of the last runs to its job, which opens in the Jobs tab', async () => {
    const server = new FakeServer([makeSchedule()]);
    const { panel, card } = await openSchedulesTab(server);
    const links = [
      ...card('sched-1')!.querySelectorAll<HTMLElement>(
        '[data-testid="schedule-run-job"]'
      )
    ];
    expect(links.map(link => link.dataset.jobId)).toEqual(['job-2', 'job-1']);
    expect(
      [
        ...card('sched-1')!.querySelectorAll('[data-testid="job-status-badge"]')
      ].map(badge => badge.textContent)
    ).toEqual(['Failed', 'Completed']);

    // When the student clicks the first run's link
    await settle(() => links[0].click());
    await settle();

    // Then the Jobs tab shows, with that job selected
    expect(shownJob(panel)).toEqual({ tab: 'jobs', jobId: 'job-2' });
    act(() => panel.dispose());
  });
});
