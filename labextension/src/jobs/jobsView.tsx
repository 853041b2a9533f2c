/**
 * The React view of the Jobs panel: the filter bar, the job table, and the selected
 * job's detail with its log. It renders a `JobsModel`; the panel re-renders it on
 * every change of the model.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { classes } from '@jupyterlab/ui-components';
import * as React from 'react';

import { formatElapsed, formatTime } from '../common/format';
import { IJobSort, StatusFilter } from './jobList';
import {
  actionsShown,
  isFinal,
  jobProgress,
  queueText,
  showsOwners,
  statusLabel,
  statusLine
} from './jobStatus';
import { JobsModel } from './jobsModel';
import { LogFollower } from './logFollower';
import { nodesOf } from './logRanks';
import { LogView } from './logView';
import {
  IDescribeJob,
  IJobFeatures,
  JOB_STATUSES,
  JobStatus,
  JsonValue
} from '../common/models';
import { hasOutput } from '../runAsJob/submission';
import { TextButton } from '../common/textButton';
import { EmptyHint, Hint } from '../common/hint';
import { pressable } from '../common/pressable';

/**
 * What the panel does for the buttons of the detail (with confirmations).
 */
export interface IJobActions {
  stop(job: IDescribeJob): void;
  remove(job: IDescribeJob): void;
  rerun(job: IDescribeJob): void;
  openNotebook(job: IDescribeJob): void;
  downloadHtml(job: IDescribeJob): void;
  /**
   * Show the pipeline that started a job (Pipelines tab); none: no link.
   */
  showPipeline?(pipelineId: string): void;
  /**
   * Show the schedule that started a job (Schedules tab); none: no link.
   */
  showSchedule?(scheduleId: string): void;
  /**
   * Open the Notification settings dialog; none: no button.
   */
  notificationSettings?(): void;
  /**
   * Show another job (a rerun's original, or its reruns); none: names without links.
   */
  showJob?(jobId: string): void;
  /**
   * Open TensorBoard over the job's folder (its own jobs only); none: no button.
   */
  openTensorBoard?(job: IDescribeJob): void;
}

/**
 * Props of the whole panel view.
 */
export interface IJobsViewProps {
  model: JobsModel;
  features: IJobFeatures;
  actions: IJobActions;
  trans: TranslationBundle;
}

const SORTS: { [key: string]: IJobSort } = {
  'create_time:desc': { by: 'create_time', order: 'desc' },
  'create_time:asc': { by: 'create_time', order: 'asc' },
  'name:asc': { by: 'name', order: 'asc' },
  'name:desc': { by: 'name', order: 'desc' },
  'status:asc': { by: 'status', order: 'asc' }
};

/**
 * The Jobs panel.
 */
export function JobsView(props: IJobsViewProps): JSX.Element {
  const { model, trans } = props;
  const jobs = model.visibleJobs;
  const showList = model.loaded && !(model.message && model.jobs.length === 0);
  return (
    <div className="jp-JupyterToJob-jobs">
      <JobsToolbar {...props} shown={jobs.length} />
      {model.message && (
        <div
          className="jp-JupyterToJob-message"
          role="alert"
          data-testid="jobs-message"
        >
          {model.message}
        </div>
      )}
      {!model.loaded && (
        <Hint testid="jobs-loading">{trans.__('Loading your jobs…')}</Hint>
      )}
      {showList && (
        <div className="jp-JupyterToJob-split">
          <div className="jp-JupyterToJob-listPane">
            {model.jobs.length === 0 ? (
              <EmptyHint testid="jobs-empty">
                {trans.__(
                  'You have no jobs yet. Open a notebook and click Run as Job on its toolbar.'
                )}
              </EmptyHint>
            ) : jobs.length === 0 ? (
              <EmptyHint testid="jobs-empty">
                {trans.__('No job matches the filter.')}
              </EmptyHint>
            ) : (
              <JobsTable {...props} jobs={jobs} />
            )}
          </div>
          {model.selected && (
            <JobDetail {...props} job={model.selected} log={model.log} />
          )}
        </div>
      )}
    </div>
  );
}

function JobsToolbar(props: IJobsViewProps & { shown: number }): JSX.Element {
  const { model, trans } = props;
  const sortKey = `${model.sort.by}:${model.sort.order}`;
  return (
    <div className="jp-JupyterToJob-toolbar">
      <label className="jp-JupyterToJob-toolbarField">
        {trans.__('Status')}
        <select
          className="jp-mod-styled"
          data-testid="jobs-filter-status"
          defaultValue={model.filter.status}
          onChange={event =>
            model.setFilter({ status: event.target.value as StatusFilter })
          }
        >
          <option value="ALL">{trans.__('All')}</option>
          <option value="ACTIVE">{trans.__('Unfinished')}</option>
          {JOB_STATUSES.map(status => (
            <option key={status} value={status}>
              {statusLabel(status)}
            </option>
          ))}
        </select>
      </label>
      <label className="jp-JupyterToJob-toolbarField">
        {trans.__('Name')}
        <input
          type="search"
          className="jp-mod-styled"
          data-testid="jobs-filter-name"
          placeholder={trans.__('Part of a name')}
          defaultValue={model.filter.name}
          onChange={event => model.setFilter({ name: event.target.value })}
        />
      </label>
      <label className="jp-JupyterToJob-toolbarField">
        {trans.__('Sort')}
        <select
          className="jp-mod-styled"
          data-testid="jobs-sort"
          defaultValue={sortKey}
          onChange={event => model.setSort(SORTS[event.target.value])}
        >
          <option value="create_time:desc">{trans.__('Newest first')}</option>
          <option value="create_time:asc">{trans.__('Oldest first')}</option>
          <option value="name:asc">{trans.__('Name, A to Z')}</option>
          <option value="name:desc">{trans.__('Name, Z to A')}</option>
          <option value="status:asc">
            {trans.__('Status, running first')}
          </option>
        </select>
      </label>
      <TextButton testid="jobs-refresh" onClick={() => void model.refresh()}>
        {trans.__('Refresh')}
      </TextButton>
      {props.actions.notificationSettings && (
        <TextButton
          testid="jobs-notification-settings"
          onClick={() => props.actions.notificationSettings?.()}
        >
          {trans.__('Notification settings…')}
        </TextButton>
      )}
      <span className="jp-JupyterToJob-count" data-testid="jobs-count">
        {model.loaded && !model.message
          ? trans.__('%1 of %2 jobs', props.shown, model.totalCount)
          : ''}
      </span>
    </div>
  );
}

function JobsTable(
  props: IJobsViewProps & { jobs: IDescribeJob[] }
): JSX.Element {
  const { model, trans, jobs } = props;
  const selectedId = model.selected?.job_id ?? null;
  // Someone who reads others' jobs (an instructor, an admin) sees whose each one is.
  const owners = showsOwners(model.jobs);
  return (
    <table className="jp-JupyterToJob-table" data-testid="jobs-table">
      <thead>
        <tr>
          <th>{trans.__('Status')}</th>
          <th>{trans.__('Name')}</th>
          {owners && (
            <th data-testid="jobs-owner-header">{trans.__('Owner')}</th>
          )}
          <th>{trans.__('Flavor')}</th>
          <th>{trans.__('Started')}</th>
          <th>{trans.__('Ended')}</th>
          <th>{trans.__('Elapsed')}</th>
          <th>{trans.__('Progress')}</th>
        </tr>
      </thead>
      <tbody>
        {jobs.map(job => (
          <tr
            key={job.job_id}
            className={classes(
              'jp-JupyterToJob-row',
              job.job_id === selectedId && 'jp-mod-selected'
            )}
            data-testid="job-row"
            {...jobAttributes(job)}
            data-own={job.own ? 'true' : 'false'}
            aria-selected={job.job_id === selectedId}
            {...pressable(() => model.select(job.job_id))}
          >
            <td>
              <StatusBadge status={job.status} />
              {job.status === 'QUEUED' && (
                <span
                  className="jp-JupyterToJob-queue"
                  data-testid="job-queue-position"
                >
                  {queueText(job.queue_position)}
                </span>
              )}
              {(job.max_attempts ?? 1) > 1 && (job.attempt ?? 1) > 1 && (
                <span
                  className="jp-JupyterToJob-attempt"
                  data-testid="job-attempt"
                >
                  {trans.__('attempt %1 of %2', job.attempt, job.max_attempts)}
                </span>
              )}
            </td>
            <td className="jp-JupyterToJob-name" title={job.input_path}>
              {job.name}
              {(job.pipeline_id || job.schedule_id) && (
                <span
                  className="jp-JupyterToJob-origin"
                  data-testid="job-origin"
                >
                  {job.pipeline_id
                    ? trans.__('pipeline')
                    : trans.__('schedule')}
                </span>
              )}
            </td>
            {owners && (
              <td data-testid="job-owner">
                {job.own ? trans.__('%1 (you)', job.owner) : job.owner}
              </td>
            )}
            <td title={job.flavor ?? undefined}>{flavorTitle(job) ?? '—'}</td>
            <td>{formatTime(job.start_time, model.now)}</td>
            <td>{formatTime(job.end_time, model.now)}</td>
            <td data-testid="job-elapsed">{formatElapsed(job, model.now)}</td>
            <td>
              <ProgressBar job={job} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/**
 * The flavor as people know it ("One whole GPU"), else its id; null for none.
 */
export function flavorTitle(
  job: Pick<IDescribeJob, 'flavor' | 'flavor_title'>
): string | null {
  return job.flavor_title || job.flavor || null;
}

/**
 * The values given to a job or a pipeline, as a wide term of a card's facts
 * (`name = value, ...`); nothing when there are none.
 */
export function ParameterFacts(props: {
  parameters?: { [name: string]: JsonValue } | null;
  trans: TranslationBundle;
}): JSX.Element | null {
  const parameters = Object.entries(props.parameters ?? {});
  if (parameters.length === 0) {
    return null;
  }
  return (
    <>
      <dt className="jp-JupyterToJob-wideTerm">
        {props.trans.__('Parameters')}
      </dt>
      <dd className="jp-JupyterToJob-wide">
        <code>
          {parameters
            .map(([name, value]) => `${name} = ${JSON.stringify(value)}`)
            .join(', ')}
        </code>
      </dd>
    </>
  );
}

/**
 * "Started by" a pipeline or a schedule, as a link to it where the panel can show it.
 */
/**
 * A job's reruns and the job it reruns, as links that show them.
 */
function RerunLinks(props: {
  job: IDescribeJob;
  jobs: readonly IDescribeJob[];
  show?: (jobId: string) => void;
  trans: TranslationBundle;
}): JSX.Element | null {
  const { job, jobs, show, trans } = props;
  const link = (target: { job_id: string; name: string }, testid: string) =>
    show ? (
      <button
        type="button"
        key={target.job_id}
        className="jp-JupyterToJob-link"
        data-testid={testid}
        data-job-id={target.job_id}
        onClick={() => show(target.job_id)}
      >
        {target.name}
      </button>
    ) : (
      <span key={target.job_id} data-testid={testid}>
        {target.name}
      </span>
    );
  const original = job.rerun_of
    ? (jobs.find(item => item.job_id === job.rerun_of) ?? {
        job_id: job.rerun_of,
        name: trans.__('an earlier job')
      })
    : null;
  const reruns = jobs
    .filter(item => item.rerun_of === job.job_id)
    .sort((a, b) => a.create_time.localeCompare(b.create_time));
  if (!original && reruns.length === 0) {
    return null;
  }
  return (
    <>
      {original && (
        <>
          <dt className="jp-JupyterToJob-wideTerm">{trans.__('Rerun of')}</dt>
          <dd className="jp-JupyterToJob-wide">
            {link(original, 'job-rerun-of')}
          </dd>
        </>
      )}
      {reruns.length > 0 && (
        <>
          <dt className="jp-JupyterToJob-wideTerm">{trans.__('Reruns')}</dt>
          <dd className="jp-JupyterToJob-wide jp-JupyterToJob-reruns">
            {reruns.map(item => link(item, 'job-rerun'))}
          </dd>
        </>
      )}
    </>
  );
}

function StartedBy(props: {
  kind: 'pipeline' | 'schedule';
  show: (() => void) | null;
  what: string;
  showIt: string;
  trans: TranslationBundle;
}): JSX.Element {
  return (
    <>
      <dt className="jp-JupyterToJob-wideTerm">
        {props.trans.__('Started by')}
      </dt>
      <dd className="jp-JupyterToJob-wide" data-testid={`job-${props.kind}`}>
        {props.show ? (
          <button
            type="button"
            className="jp-JupyterToJob-link"
            data-testid={`job-show-${props.kind}`}
            onClick={props.show}
          >
            {props.showIt}
          </button>
        ) : (
          props.what
        )}
      </dd>
    </>
  );
}

/**
 * The status as a coloured word.
 */
export function StatusBadge(props: { status: JobStatus }): JSX.Element {
  return (
    <span
      className={`jp-JupyterToJob-badge jp-JupyterToJob-badge-${props.status.toLowerCase()}`}
      data-testid="job-status-badge"
      data-status={props.status}
    >
      {statusLabel(props.status)}
    </span>
  );
}

/**
 * The attributes of a job's element (row, detail, sidebar item): its id and status,
 * by which the browser tests find it.
 */
export function jobAttributes(job: IDescribeJob): {
  'data-job-id': string;
  'data-status': string;
} {
  return { 'data-job-id': job.job_id, 'data-status': job.status };
}

/**
 * Cells done of the total, as a bar with the numbers on it.
 */
export function ProgressBar(props: { job: IDescribeJob }): JSX.Element {
  const { job } = props;
  const progress = jobProgress(job);
  const indeterminate = progress.fraction === null && !isFinal(job.status);
  const percent =
    progress.fraction === null ? 0 : Math.round(progress.fraction * 100);
  return (
    <div
      className={classes(
        'jp-JupyterToJob-progress',
        indeterminate && 'jp-mod-indeterminate'
      )}
      data-testid="job-progress"
      data-done={progress.done}
      data-total={progress.total ?? ''}
      role="progressbar"
      aria-valuemin={0}
      aria-valuemax={progress.total ?? undefined}
      aria-valuenow={progress.total === null ? undefined : progress.done}
      title={progress.text}
    >
      <div
        className={`jp-JupyterToJob-progressFill jp-JupyterToJob-progressFill-${job.status.toLowerCase()}`}
        style={{ width: `${percent}%` }}
      />
      <span className="jp-JupyterToJob-progressText">{progress.text}</span>
    </div>
  );
}

function JobDetail(
  props: IJobsViewProps & { job: IDescribeJob; log: LogFollower | null }
): JSX.Element {
  const { model, trans, job, actions, features } = props;
  const busy = model.busyAction !== null;
  const button = (
    testid: string,
    label: string,
    onClick: () => void,
    extraClass = ''
  ) => (
    <button
      type="button"
      className={`jp-JupyterToJob-button ${extraClass}`.trim()}
      data-testid={testid}
      disabled={busy}
      onClick={onClick}
    >
      {label}
    </button>
  );
  const shown = actionsShown(job, features);
  return (
    <section
      className="jp-JupyterToJob-detail"
      data-testid="job-detail"
      {...jobAttributes(job)}
    >
      <header className="jp-JupyterToJob-detailHeader">
        <h2 className="jp-JupyterToJob-detailTitle">{job.name}</h2>
        <StatusBadge status={job.status} />
        <div className="jp-JupyterToJob-actions">
          {shown.stop &&
            button(
              'job-action-stop',
              trans.__('Stop'),
              () => actions.stop(job),
              'jp-JupyterToJob-warn'
            )}
          {shown.delete &&
            button(
              'job-action-delete',
              trans.__('Delete'),
              () => actions.remove(job),
              'jp-JupyterToJob-danger'
            )}
          {shown.rerun &&
            button('job-action-rerun', trans.__('Rerun'), () =>
              actions.rerun(job)
            )}
          {isFinal(job.status) &&
            hasOutput(job, 'ipynb') &&
            button(
              'job-action-open-notebook',
              trans.__('Open executed notebook'),
              () => actions.openNotebook(job)
            )}
          {isFinal(job.status) &&
            hasOutput(job, 'html') &&
            button('job-action-download-html', trans.__('Download HTML'), () =>
              actions.downloadHtml(job)
            )}
          {job.own &&
            actions.openTensorBoard &&
            button('job-action-tensorboard', trans.__('TensorBoard'), () =>
              actions.openTensorBoard?.(job)
            )}
        </div>
      </header>
      <p className="jp-JupyterToJob-statusLine" data-testid="job-detail-status">
        {statusLine(job)}
      </p>
      {model.busyAction && (
        <Hint testid="job-action-busy">{trans.__('Working on it…')}</Hint>
      )}
      {model.actionError && (
        <p
          className="jp-JupyterToJob-message"
          role="alert"
          data-testid="job-action-error"
        >
          {model.actionError}
        </p>
      )}
      {!job.own && (
        <Hint testid="job-not-yours">
          {trans.__(
            'This is %1’s job: you can follow it and read its log and outputs; only %1 can rerun it.',
            job.owner
          )}
        </Hint>
      )}
      <dl className="jp-JupyterToJob-facts">
        {!job.own && (
          <>
            <dt>{trans.__('Owner')}</dt>
            <dd data-testid="job-detail-owner">{job.owner}</dd>
          </>
        )}
        <dt className="jp-JupyterToJob-wideTerm">{trans.__('Notebook')}</dt>
        <dd className="jp-JupyterToJob-wide">{job.input_path}</dd>
        {job.pipeline_id && (
          <StartedBy
            kind="pipeline"
            show={
              actions.showPipeline
                ? () => actions.showPipeline?.(job.pipeline_id!)
                : null
            }
            what={trans.__('a pipeline')}
            showIt={trans.__('a pipeline: show it')}
            trans={trans}
          />
        )}
        {job.schedule_id && (
          <StartedBy
            kind="schedule"
            show={
              actions.showSchedule
                ? () => actions.showSchedule?.(job.schedule_id!)
                : null
            }
            what={trans.__('a schedule')}
            showIt={trans.__('a schedule: show it')}
            trans={trans}
          />
        )}
        <RerunLinks
          job={job}
          jobs={model.jobs}
          show={actions.showJob}
          trans={trans}
        />
        <dt>{trans.__('Flavor')}</dt>
        <dd title={job.flavor ?? undefined}>
          {flavorTitle(job) ?? trans.__('default')}
        </dd>
        <dt>{trans.__('GPU')}</dt>
        <dd>{job.gpu?.description || trans.__('none')}</dd>
        <dt>{trans.__('Created')}</dt>
        <dd>{formatTime(job.create_time, model.now)}</dd>
        <dt>{trans.__('Started')}</dt>
        <dd>{formatTime(job.start_time, model.now)}</dd>
        <dt>{trans.__('Ended')}</dt>
        <dd>{formatTime(job.end_time, model.now)}</dd>
        <dt>{trans.__('Elapsed')}</dt>
        <dd>{formatElapsed(job, model.now)}</dd>
        <dt>{trans.__('Progress')}</dt>
        <dd>
          <ProgressBar job={job} />
        </dd>
        {job.deadline_seconds !== null && (
          <>
            <dt>{trans.__('Deadline')}</dt>
            <dd>{trans.__('%1 min', Math.round(job.deadline_seconds / 60))}</dd>
          </>
        )}
        {job.exit_code !== null && (
          <>
            <dt>{trans.__('Exit code')}</dt>
            <dd>{job.exit_code}</dd>
          </>
        )}
        <ParameterFacts parameters={job.parameters} trans={trans} />
        <dt className="jp-JupyterToJob-wideTerm">{trans.__('Job ID')}</dt>
        <dd className="jp-JupyterToJob-wide">
          <code>{job.job_id}</code>
        </dd>
      </dl>
      {job.error && (
        <details className="jp-JupyterToJob-error" data-testid="job-error" open>
          <summary>{`${job.error.ename}: ${job.error.evalue}`}</summary>
          {job.error.traceback && (
            <pre className="jp-JupyterToJob-traceback">
              {job.error.traceback}
            </pre>
          )}
        </details>
      )}
      <LogView
        key={job.job_id}
        log={props.log}
        error={model.logError}
        trans={trans}
        onLoadEarlier={() => void model.loadEarlierLog()}
        nodes={nodesOf(job)}
      />
    </section>
  );
}
