/**
 * The hub as an admin's `helm upgrade --install` deploys it, used in Chromium: Zero to
 * JupyterHub 4.4.0 with hub_config/kubernetes/values.yaml and this project's chart, on a
 * real control plane whose node runs every pod from its image
 * (tests/support/cluster/chart_deployment.py). The browser reaches it only through the
 * proxy-public Service; everything the hub and the job service do goes through the real
 * API server, with their own service accounts, RBAC and Pod Security.
 *
 * The catalog (chart_deployment.people_catalog): ana is enrolled in Machine Learning 101
 * (a quarter of a GPU, in class now); rhea is in the research group vision-lab; the
 * flavor "CPU job" is everyone's. The webServer of playwright.chart.config.js installs it.
 */
import { expect, test } from '../helpers/hubPageErrors';

import {
  hubScreenshotsLightAndDark,
  labScreenshotsLightAndDark,
  serverRequest,
  signIn,
  startFromSpawnPage
} from '../helpers/HubHelper';
import {
  expectReadyToSubmit,
  notebook,
  SCREENSHOTS,
  SELECTORS
} from '../helpers/RunAsJobHelper';

test.skip(
  process.getuid?.() !== 0,
  'The chart-deployed hub needs root: the test cluster runs each pod in a network and ' +
    'mount namespace of its own. Run `make ui-test` (or `jlpm test:chart`) as root.'
);
// A pod's start on the test cluster takes seconds, not the milliseconds of a local process.
test.setTimeout(300 * 1000);

test('a student starts Machine Learning 101 at a quarter of a GPU', async ({
  page
}) => {
  // Given ana, enrolled in the course, logs in (the chart's dummy authenticator)
  await signIn(page, 'ana');

  // Then her spawn page offers the course, open now, at a quarter of a GPU
  await expect(page).toHaveURL(/\/hub\/spawn/);
  const card = page.locator('.gpus-card[data-profile="ml101"]');
  await expect(card).toContainText('Machine Learning 101');
  await expect(card).toHaveAttribute('data-available', 'true');
  await expect(card.locator('.gpus-gpu')).toContainText('1/4');
  await hubScreenshotsLightAndDark(page, SCREENSHOTS, 'chart-spawn-page');

  // When she chooses the course and starts
  await startFromSpawnPage(page, 'ana', 'ml101');

  // Then JupyterLab loads behind the hub, its status bar showing her quarter of a GPU
  const status = page.getByTestId('session-status');
  await expect(status).toBeVisible({ timeout: 30 * 1000 });
  await expect(status).toContainText(/GPU: 1\/4 of/);
  await labScreenshotsLightAndDark(page, SCREENSHOTS, 'chart-student-lab');
});

test('a researcher runs a notebook as a job and opens its executed copy', async ({
  page
}) => {
  const user = 'rhea';
  const notebookName = 'analysis.ipynb';
  const line = 'hello from a job on the cluster';

  // Given rhea, of the research group vision-lab, with a CPU server of hers
  await signIn(page, user);
  await expect(page).toHaveURL(/\/hub\/spawn/);
  await startFromSpawnPage(page, user, 'cpu');
  // and a notebook of hers that prints a known line
  const saved = await serverRequest(
    page,
    user,
    'PUT',
    `api/contents/${notebookName}`,
    {
      type: 'notebook',
      format: 'json',
      content: notebook([
        { source: `print('${line}', flush=True)` },
        { source: 'x = 6 * 7\nprint(x)' }
      ])
    }
  );
  expect(saved.status(), await saved.text()).toBeLessThan(300);

  // When she opens it and clicks Run as Job on its toolbar
  await page.goto(`/user/${user}/lab/tree/${notebookName}`);
  const button = page.locator(SELECTORS.RUN_AS_JOB_BUTTON).first();
  await expect(button).toBeVisible({ timeout: 60 * 1000 });
  await button.click();

  // Then the dialog offers the CPU job flavor; she picks it and submits
  const dialog = page.locator(SELECTORS.DIALOG);
  await expect(dialog).toBeVisible();
  const flavor = dialog.locator(
    '[data-testid="flavor-option"][data-flavor-id="cpu-job"]'
  );
  await expect(flavor).toBeVisible({ timeout: 30 * 1000 });
  await flavor.click();
  await expect(flavor.getByRole('radio')).toBeChecked();
  await expectReadyToSubmit(dialog);
  await dialog.locator(SELECTORS.SUBMIT).click();
  await expect(dialog).toBeHidden({ timeout: 30 * 1000 });

  // Then the Jobs panel follows the job, a Kubernetes Job the job service made, to
  // COMPLETED
  const panel = page.locator(SELECTORS.JOBS_PANEL);
  const detail = panel.getByTestId('job-detail');
  await expect(detail).toBeVisible();
  await expect(detail).toHaveAttribute('data-status', 'COMPLETED', {
    timeout: 180 * 1000
  });
  // And its log has the notebook's lines, complete
  const log = detail.getByTestId('job-log');
  await expect(log).toContainText(line);
  await expect(log).toContainText(/\[cell \d+\] 42/);
  await expect(detail.getByTestId('job-log-state')).toHaveText('complete');
  await labScreenshotsLightAndDark(page, SCREENSHOTS, 'chart-job-completed');

  // When she opens the executed notebook from the panel
  await detail.getByTestId('job-action-open-notebook').click();

  // Then it is saved among her files and opens, with the job's outputs
  await expect(
    page.locator(
      '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output',
      {
        hasText: line
      }
    )
  ).toBeVisible({ timeout: 30 * 1000 });
  await expect(
    page.locator(
      '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output',
      {
        hasText: '42'
      }
    )
  ).toBeVisible();
  await labScreenshotsLightAndDark(
    page,
    SCREENSHOTS,
    'chart-executed-notebook'
  );
});
