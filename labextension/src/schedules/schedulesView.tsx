/**
 * The Schedules tab of the Jobs panel: each schedule with its rule in words, its next
 * run, its status sentence and its last runs (each with a link to its job), and the
 * buttons its status allows.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import * as React from 'react';

import { Card, CardAction, CardHeader, CardList } from '../common/cardList';
import { formatTime } from '../common/format';
import { StatusBadge } from '../jobs/jobsView';
import { ISchedule, IScheduleRun } from './scheduleModels';
import {
  ruleText,
  scheduleActions,
  scheduleName,
  scheduleStatusLine,
  scheduleTarget,
  stopText
} from './scheduleRule';
import { SchedulesModel } from './schedulesModel';

/**
 * What the panel does for the schedule buttons (with confirmations) and job links.
 */
export interface IScheduleActions {
  pause(schedule: ISchedule): void;
  resume(schedule: ISchedule): void;
  remove(schedule: ISchedule): void;
  showJob(jobId: string): void;
  showPipeline(pipelineId: string): void;
}

export interface ISchedulesViewProps {
  model: SchedulesModel;
  actions: IScheduleActions;
  trans: TranslationBundle;
}

function statusWord(status: ISchedule['status'], trans: TranslationBundle) {
  switch (status) {
    case 'ACTIVE':
      return trans.__('Active');
    case 'PAUSED':
      return trans.__('Paused');
    default:
      return trans.__('Ended');
  }
}

/**
 * A schedule's status as a badge.
 */
function ScheduleBadge(props: {
  status: ISchedule['status'];
  trans: TranslationBundle;
}): JSX.Element {
  return (
    <span
      className={`jp-JupyterToJob-badge jp-JupyterToJob-badge-${props.status.toLowerCase()}`}
      data-testid="schedule-status-badge"
    >
      {statusWord(props.status, props.trans)}
    </span>
  );
}

/**
 * The list of the user's schedules.
 */
export function SchedulesView(props: ISchedulesViewProps): JSX.Element {
  const { model, trans } = props;
  return (
    <CardList
      model={model}
      kind="schedule"
      countText={trans._n(
        '%1 schedule',
        '%1 schedules',
        model.schedules.length
      )}
      loadingText={trans.__('Loading your schedules…')}
      emptyText={trans.__(
        'You have no schedules. In the Run as Job dialog, tick “Repeat on a schedule” to run a notebook again and again.'
      )}
      label={trans.__('Schedules')}
      empty={model.schedules.length === 0}
      trans={trans}
    >
      {model.schedules.map(schedule => (
        <ScheduleCard
          key={schedule.schedule_id}
          {...props}
          schedule={schedule}
        />
      ))}
    </CardList>
  );
}

function ScheduleCard(
  props: ISchedulesViewProps & { schedule: ISchedule }
): JSX.Element {
  const { model, actions, trans, schedule } = props;
  const shown = scheduleActions(schedule);
  const busy = model.busyId !== null;
  const stops = stopText(schedule, model.now);
  const name = scheduleName(schedule);
  return (
    <Card
      highlighted={model.highlighted === schedule.schedule_id}
      label={name}
      data-testid="schedule"
      data-schedule-id={schedule.schedule_id}
      data-status={schedule.status}
    >
      <CardHeader
        title={name}
        badge={<ScheduleBadge status={schedule.status} trans={trans} />}
      >
        {shown.pause && (
          <CardAction
            testid="schedule-action-pause"
            label={trans.__('Pause “%1”', name)}
            disabled={busy}
            onClick={() => actions.pause(schedule)}
          >
            {trans.__('Pause')}
          </CardAction>
        )}
        {shown.resume && (
          <CardAction
            testid="schedule-action-resume"
            label={trans.__('Resume “%1”', name)}
            disabled={busy}
            onClick={() => actions.resume(schedule)}
          >
            {trans.__('Resume')}
          </CardAction>
        )}
        {shown.delete && (
          <CardAction
            testid="schedule-action-delete"
            label={trans.__('Delete “%1”', name)}
            disabled={busy}
            onClick={() => actions.remove(schedule)}
            variant="danger"
          >
            {trans.__('Delete')}
          </CardAction>
        )}
      </CardHeader>
      {(schedule.status !== 'ACTIVE' || schedule.status_message) && (
        // An active schedule's news is its next run, in the facts below.
        <p className="jp-JupyterToJob-statusLine" data-testid="schedule-status">
          {scheduleStatusLine(schedule, model.now)}
        </p>
      )}
      <dl className="jp-JupyterToJob-facts">
        <dt>{schedule.job ? trans.__('Notebook') : trans.__('Runs')}</dt>
        <dd data-testid="schedule-notebook">{scheduleTarget(schedule)}</dd>
        <dt>{trans.__('Repeats')}</dt>
        <dd data-testid="schedule-rule">{ruleText(schedule)}</dd>
        <dt>{trans.__('Next run')}</dt>
        <dd data-testid="schedule-next-run">
          {schedule.status === 'ACTIVE'
            ? formatTime(schedule.next_run_time, model.now)
            : '—'}
        </dd>
        <dt>{trans.__('Runs so far')}</dt>
        <dd data-testid="schedule-runs">
          {schedule.max_runs
            ? trans.__('%1 of %2', schedule.runs, schedule.max_runs)
            : String(schedule.runs)}
        </dd>
        {stops && (
          <>
            <dt>{trans.__('Stops')}</dt>
            <dd data-testid="schedule-stops">{stops}</dd>
          </>
        )}
        {schedule.job?.flavor && (
          <>
            <dt>{trans.__('Flavor')}</dt>
            <dd title={schedule.job.flavor} data-testid="schedule-flavor">
              {schedule.flavor_title ?? schedule.job.flavor}
            </dd>
          </>
        )}
      </dl>
      {schedule.recent_runs.length > 0 && (
        <div className="jp-JupyterToJob-runs">
          <h4 className="jp-JupyterToJob-runsTitle">{trans.__('Last runs')}</h4>
          <ul data-testid="schedule-recent-runs">
            {schedule.recent_runs.map(run => (
              <ScheduleRunItem
                key={run.slot_time}
                run={run}
                now={model.now}
                actions={actions}
                trans={trans}
              />
            ))}
          </ul>
        </div>
      )}
    </Card>
  );
}

function ScheduleRunItem(props: {
  run: IScheduleRun;
  now: Date;
  actions: IScheduleActions;
  trans: TranslationBundle;
}): JSX.Element {
  const { run, now, actions, trans } = props;
  return (
    <li className="jp-JupyterToJob-run" data-testid="schedule-run">
      <span className="jp-JupyterToJob-runTime">
        {formatTime(run.slot_time, now)}
      </span>
      {run.outcome ? (
        <StatusBadge status={run.outcome} />
      ) : run.job_id || run.pipeline_id ? (
        <span className="jp-JupyterToJob-hint">{trans.__('running')}</span>
      ) : null}
      {run.job_id && (
        <button
          type="button"
          className="jp-JupyterToJob-link"
          data-testid="schedule-run-job"
          data-job-id={run.job_id}
          onClick={() => actions.showJob(run.job_id!)}
        >
          {trans.__('Show job')}
        </button>
      )}
      {run.pipeline_id && (
        <button
          type="button"
          className="jp-JupyterToJob-link"
          data-testid="schedule-run-pipeline"
          data-pipeline-id={run.pipeline_id}
          onClick={() => actions.showPipeline(run.pipeline_id!)}
        >
          {trans.__('Show pipeline')}
        </button>
      )}
      {run.message && (
        <span className="jp-JupyterToJob-runMessage">{run.message}</span>
      )}
    </li>
  );
}
