/**
 * Job flavors in the Run as Job dialog: which ones to offer and how they read.
 */
import { formatDuration } from '../common/format';
import { IJobFlavorInfo } from '../common/models';

const MINUTE_SECONDS = 60;

/**
 * The flavors a user can pick: the available ones, in the server's order.
 */
export function availableFlavors(
  flavors: readonly IJobFlavorInfo[]
): IJobFlavorInfo[] {
  return flavors.filter(flavor => flavor.available);
}

/**
 * The flavor to preselect: the server's default when it is available, else the
 * first available one; null when none is.
 */
export function defaultFlavor(
  flavors: readonly IJobFlavorInfo[]
): IJobFlavorInfo | null {
  const offered = availableFlavors(flavors);
  return offered.find(flavor => flavor.default) ?? offered[0] ?? null;
}

/**
 * What the flavor gives a job, in words: "1 x A100 80 GB, 8 CPU, 32 GiB",
 * "1/4 of an RTX 4090, 2 CPUs, 4 GiB", or "No GPU, 2 CPUs, 4 GiB".
 */
export function flavorSummary(
  flavor: Pick<IJobFlavorInfo, 'gpu' | 'resources'>
): string {
  const gpu = flavor.gpu?.trim() || 'No GPU';
  const resources = flavor.resources?.trim();
  return resources ? `${gpu}, ${resources}` : gpu;
}

/**
 * How busy the flavor is (everyone's jobs): "2 running, 1 queued".
 */
export function flavorLoad(
  flavor: Pick<IJobFlavorInfo, 'running' | 'queued'>
): string {
  return `${flavor.running ?? 0} running, ${flavor.queued ?? 0} queued`;
}

/**
 * The deadline limits of a flavor in whole minutes, as the dialog's input takes them.
 */
export interface IDeadlineMinutes {
  /**
   * The flavor's default deadline, rounded up to a minute and within `max`.
   */
  initial: number;
  /**
   * The longest deadline the flavor allows, rounded down to a minute (at least 1).
   */
  max: number;
}

/**
 * The deadline bounds of a flavor, in minutes.
 */
export function deadlineMinutes(
  flavor: Pick<
    IJobFlavorInfo,
    'default_deadline_seconds' | 'max_deadline_seconds'
  >
): IDeadlineMinutes {
  const max = Math.max(
    1,
    Math.floor(flavor.max_deadline_seconds / MINUTE_SECONDS)
  );
  const initial = Math.min(
    max,
    Math.max(1, Math.ceil(flavor.default_deadline_seconds / MINUTE_SECONDS))
  );
  return { initial, max };
}

/**
 * What is wrong with a deadline typed in the dialog, as a sentence; null when it fits.
 *
 * @param text The input's text, in minutes.
 * @param flavor The picked flavor.
 */
export function deadlineProblem(
  text: string,
  flavor: Pick<
    IJobFlavorInfo,
    'default_deadline_seconds' | 'max_deadline_seconds'
  >
): string | null {
  const { max } = deadlineMinutes(flavor);
  const minutes = Number(text.trim());
  if (
    text.trim() === '' ||
    !Number.isInteger(minutes) ||
    minutes < 1 ||
    minutes > max
  ) {
    return `Give the deadline in whole minutes, from 1 to ${max} (${formatDuration(
      max * MINUTE_SECONDS * 1000
    )}) for this flavor.`;
  }
  return null;
}

/**
 * The deadline limits in words: "default 30 min, at most 4 h".
 */
export function deadlineHint(
  flavor: Pick<
    IJobFlavorInfo,
    'default_deadline_seconds' | 'max_deadline_seconds'
  >
): string {
  const { initial, max } = deadlineMinutes(flavor);
  const words = (minutes: number) => formatDuration(minutes * 60 * 1000);
  return `default ${words(initial)}, at most ${words(max)}`;
}
