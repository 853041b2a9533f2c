/**
 * The browser test on the chart-deployed hub (project `chart`, chart-tests/), in Debian's
 * Chromium as playwright.config.js sets it up.
 *
 * Its webServer installs the whole hub with helm on a fresh test cluster (a real control
 * plane, the node running every pod from its image) and relays 127.0.0.1:PORT to the
 * proxy-public Service: `python -m tests.support.cluster --deploy-chart`
 * (tests/support/cluster/README.md). It needs root (each pod gets a network and mount
 * namespace of its own) and `make k8s-tools`; its output goes to
 * test-artifacts/ui/chart-deployment.log, the cluster's files to .run/ui-chart-tests/ (kept
 * until the next run, for a look after a failure).
 *
 * A config of its own: Playwright starts every webServer of a config before any test,
 * whichever projects run, and this one takes a minute, which the other suites need not
 * wait for. `jlpm test:chart` runs it; `make ui-test` runs both configs.
 * Not root: no webServer, and the test is skipped with the reason.
 */
const { execFileSync } = require('child_process');
const path = require('path');
const base = require('./playwright.config.js');

const repoRoot = path.resolve(__dirname, '..', '..');
const venvBin = path.join(repoRoot, '.venv', 'bin');
const artifactsDir =
  process.env.UI_ARTIFACTS_DIR || path.join(repoRoot, 'test-artifacts', 'ui');
const isRoot = process.getuid?.() === 0;
// (said once, by the runner: the workers load this file too)
if (!isRoot && process.env.TEST_WORKER_INDEX === undefined) {
  console.warn(
    'Skipping the chart-deployed hub (project chart): it needs root, the test ' +
      "cluster's node runs each pod in a network and mount namespace of its own."
  );
}

// Picked once in the runner and handed to the workers, as in playwright.config.js.
if (!process.env.UI_CHART_PORT) {
  process.env.UI_CHART_PORT = execFileSync(path.join(venvBin, 'python'), [
    '-c',
    'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
  ])
    .toString()
    .trim();
}
const chartURL = `http://127.0.0.1:${process.env.UI_CHART_PORT}`;
const chartRuntime =
  process.env.UI_CHART_RUNTIME || path.join(repoRoot, '.run', 'ui-chart-tests');
const chartLog = path.join(artifactsDir, 'chart-deployment.log');

module.exports = {
  ...base,
  testDir: 'chart-tests',
  // Its own results and report: a run of playwright.config.js does not erase them.
  outputDir: path.join(artifactsDir, 'chart-results'),
  reporter: [
    ['list'],
    [
      'html',
      { open: 'never', outputFolder: path.join(artifactsDir, 'chart-report') }
    ]
  ],
  projects: [
    // The hub as helm installs it, through its proxy-public Service.
    { name: 'chart', testDir: 'chart-tests', use: { baseURL: chartURL } }
  ],
  webServer: isRoot
    ? [
        {
          // Output to a file, `exec` so that SIGTERM reaches the cluster's Python, which
          // then stops the hub's pods and the control plane and removes their addresses.
          command: `rm -rf "${chartRuntime}" && mkdir -p "${chartRuntime}" "${artifactsDir}" && cd "${repoRoot}" && exec "${path.join(venvBin, 'python')}" -m tests.support.cluster --deploy-chart --port ${process.env.UI_CHART_PORT} --folder "${chartRuntime}" > "${chartLog}" 2>&1`,
          url: `${chartURL}/hub/api`,
          timeout: 360 * 1000,
          reuseExistingServer: false,
          gracefulShutdown: { signal: 'SIGTERM', timeout: 60 * 1000 }
        }
      ]
    : []
};
