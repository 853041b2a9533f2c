/**
 * The Pipelines tab of the Jobs panel: each pipeline with its stages side by side and
 * each stage's jobs, their status and why (failed where, stopped because, skipped);
 * Stop and Delete when the viewer may; a job opens its log in the Jobs tab.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { classes } from '@jupyterlab/ui-components';
import * as React from 'react';

import { Card, CardAction, CardHeader, CardList } from '../common/cardList';
import { formatTime } from '../common/format';
import { ParameterFacts } from '../jobs/jobsView';
import {
  IDescribePipeline,
  IDescribePipelineJob,
  IDescribeStage
} from './pipelineModels';
import {
  hasJob,
  pipelineActions,
  pipelineJobName,
  pipelineJobProgress,
  pipelineJobWhy,
  pipelineStatusLabel
} from './pipelineStatus';
import { PipelinesModel } from './pipelinesModel';
import { TextButton } from '../common/textButton';
import { Hint } from '../common/hint';

/**
 * What the panel does for the pipeline buttons (with confirmations) and jobs.
 */
export interface IPipelineActions {
  stop(pipeline: IDescribePipeline): void;
  remove(pipeline: IDescribePipeline): void;
  rerun(pipeline: IDescribePipeline): void;
  showJob(jobId: string): void;
}

export interface IPipelinesViewProps {
  model: PipelinesModel;
  actions: IPipelineActions;
  trans: TranslationBundle;
  /**
   * Opens the pipeline builder ("Run notebooks as a pipeline…"); none: no button.
   */
  onNewPipeline?: (() => void) | null;
}

/**
 * A status as a coloured word, for pipelines, stages and their jobs.
 */
export function PipelineBadge(props: {
  status: string;
  testid?: string;
}): JSX.Element {
  return (
    <span
      className={`jp-JupyterToJob-badge jp-JupyterToJob-badge-${props.status.toLowerCase()}`}
      data-testid={props.testid ?? 'pipeline-status-badge'}
      data-status={props.status}
    >
      {pipelineStatusLabel(props.status)}
    </span>
  );
}

/**
 * The list of the user's pipelines.
 */
export function PipelinesView(props: IPipelinesViewProps): JSX.Element {
  const { model, trans, onNewPipeline } = props;
  return (
    <CardList
      model={model}
      kind="pipeline"
      countText={trans._n(
        '%1 pipeline',
        '%1 pipelines',
        model.pipelines.length
      )}
      loadingText={trans.__('Loading your pipelines…')}
      emptyText={trans.__(
        'You have no pipelines. Open the notebooks to chain, then run “Run notebooks as a pipeline…” from the command palette.'
      )}
      label={trans.__('Pipelines')}
      empty={model.pipelines.length === 0}
      trans={trans}
      toolbar={
        onNewPipeline && (
          <TextButton testid="pipelines-new" onClick={onNewPipeline}>
            {trans.__('Run notebooks as a pipeline…')}
          </TextButton>
        )
      }
    >
      {model.pipelines.map(pipeline => (
        <PipelineCard
          key={pipeline.pipeline_id}
          {...props}
          pipeline={pipeline}
        />
      ))}
    </CardList>
  );
}

function PipelineCard(
  props: IPipelinesViewProps & { pipeline: IDescribePipeline }
): JSX.Element {
  const { model, actions, trans, pipeline } = props;
  const shown = pipelineActions(pipeline);
  const busy = model.busyId !== null;
  return (
    <Card
      highlighted={model.highlighted === pipeline.pipeline_id}
      label={pipeline.name}
      data-testid="pipeline"
      data-pipeline-id={pipeline.pipeline_id}
      data-status={pipeline.status}
    >
      <CardHeader
        title={pipeline.name}
        badge={<PipelineBadge status={pipeline.status} />}
      >
        {shown.stop && (
          <CardAction
            testid="pipeline-action-stop"
            label={trans.__('Stop “%1”', pipeline.name)}
            disabled={busy}
            onClick={() => actions.stop(pipeline)}
            variant="warn"
          >
            {trans.__('Stop')}
          </CardAction>
        )}
        {shown.rerun && (
          <CardAction
            testid="pipeline-action-rerun"
            label={trans.__('Rerun “%1”', pipeline.name)}
            disabled={busy}
            onClick={() => actions.rerun(pipeline)}
          >
            {trans.__('Rerun')}
          </CardAction>
        )}
        {shown.delete && (
          <CardAction
            testid="pipeline-action-delete"
            label={trans.__('Delete “%1”', pipeline.name)}
            disabled={busy}
            onClick={() => actions.remove(pipeline)}
            variant="danger"
          >
            {trans.__('Delete')}
          </CardAction>
        )}
      </CardHeader>
      {pipeline.status_message && (
        <p className="jp-JupyterToJob-statusLine" data-testid="pipeline-status">
          {pipeline.status_message}
        </p>
      )}
      <dl className="jp-JupyterToJob-facts">
        <dt>{trans.__('Created')}</dt>
        <dd>{formatTime(pipeline.create_time, model.now)}</dd>
        <dt>{trans.__('Ended')}</dt>
        <dd>{formatTime(pipeline.end_time, model.now)}</dd>
        <dt>{trans.__('Shared folder')}</dt>
        <dd data-testid="pipeline-shared-folder">
          <code>{pipeline.shared_folder}</code>
        </dd>
        {pipeline.template_path && (
          <>
            <dt>{trans.__('Template')}</dt>
            <dd data-testid="pipeline-template">{pipeline.template_path}</dd>
          </>
        )}
        <ParameterFacts parameters={pipeline.parameters} trans={trans} />
      </dl>
      <ol
        className="jp-JupyterToJob-stages"
        aria-label={trans.__('Stages of “%1”', pipeline.name)}
      >
        {pipeline.stages.map((stage, index) => (
          <StageColumn
            key={`${index}-${stage.name}`}
            stage={stage}
            index={index}
            current={pipeline.current_stage === index}
            actions={actions}
            trans={trans}
          />
        ))}
      </ol>
    </Card>
  );
}

function StageColumn(props: {
  stage: IDescribeStage;
  index: number;
  current: boolean;
  actions: IPipelineActions;
  trans: TranslationBundle;
}): JSX.Element {
  const { stage, index, current, actions, trans } = props;
  return (
    <li
      className={classes('jp-JupyterToJob-stage', current && 'jp-mod-current')}
      data-testid="pipeline-stage"
      data-stage={stage.name}
      data-status={stage.status}
    >
      <div className="jp-JupyterToJob-stageHeader">
        <span className="jp-JupyterToJob-stageName">
          {trans.__('%1. %2', index + 1, stage.name)}
        </span>
        <PipelineBadge status={stage.status} testid="stage-status-badge" />
      </div>
      {stage.status_message && (
        <Hint testid="stage-status">{stage.status_message}</Hint>
      )}
      <ul className="jp-JupyterToJob-stageJobs">
        {stage.jobs.map((job, jobIndex) => (
          <PipelineJobItem
            key={`${jobIndex}-${job.input_path}`}
            job={job}
            actions={actions}
            trans={trans}
          />
        ))}
      </ul>
    </li>
  );
}

function PipelineJobItem(props: {
  job: IDescribePipelineJob;
  actions: IPipelineActions;
  trans: TranslationBundle;
}): JSX.Element {
  const { job, actions, trans } = props;
  const name = pipelineJobName(job);
  const why = pipelineJobWhy(job);
  const progress = pipelineJobProgress(job);
  return (
    <li
      className="jp-JupyterToJob-stageJob"
      data-testid="pipeline-job"
      data-status={job.status}
      data-job-id={job.job_id ?? ''}
    >
      <div className="jp-JupyterToJob-stageJobHeader">
        {hasJob(job) ? (
          <button
            type="button"
            className="jp-JupyterToJob-link"
            data-testid="pipeline-job-open"
            title={trans.__('Show the job and its log')}
            onClick={() => actions.showJob(job.job_id)}
          >
            {name}
          </button>
        ) : (
          <span className="jp-JupyterToJob-stageJobName">{name}</span>
        )}
        <PipelineBadge status={job.status} testid="pipeline-job-status" />
      </div>
      <span className="jp-JupyterToJob-hint" title={job.input_path}>
        {[job.flavor_title ?? job.flavor, progress].filter(Boolean).join(' · ')}
      </span>
      {why && (
        <span
          className={classes(
            'jp-JupyterToJob-stageJobWhy',
            job.status === 'FAILED' && 'jp-mod-error'
          )}
          data-testid="pipeline-job-why"
        >
          {why}
        </span>
      )}
    </li>
  );
}
