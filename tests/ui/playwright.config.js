/**
 * Browser tests of the JupyterLab side, in Debian's Chromium (no browser download).
 *
 * Playwright starts JupyterLab itself (webServer below) on a free port, with the Run as
 * Job extension as last built in labextension/. Screenshots, failure artifacts and the
 * HTML report go to test-artifacts/ui/ at the repository root.
 */
const { execFileSync } = require('child_process');
const path = require('path');
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const repoRoot = path.resolve(__dirname, '..', '..');
const venvBin = path.join(repoRoot, '.venv', 'bin');
const artifactsDir = path.join(repoRoot, 'test-artifacts', 'ui');
const chromium = process.env.CHROMIUM_PATH || '/usr/lib/chromium/chromium';

// Playwright loads this file in the runner and again in every worker: pick the port
// once and hand it down through the environment, which the workers inherit.
if (!process.env.UI_TEST_PORT) {
  process.env.UI_TEST_PORT = execFileSync(path.join(venvBin, 'python'), [
    '-c',
    'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
  ])
    .toString()
    .trim();
}
const baseURL = `http://127.0.0.1:${process.env.UI_TEST_PORT}`;

// The test server runs as a course server would: GPUSpawner's environment gives it a
// quarter of an RTX 4090 and a class that ends soon (the status bar's warning time).
// Computed once in the runner, like the port.
if (!process.env.UI_TEST_CLASS_END) {
  const minutesFromNow = minutes =>
    new Date(Date.now() + minutes * 60 * 1000).toISOString();
  process.env.UI_TEST_CLASS_END = minutesFromNow(9);
  process.env.UI_TEST_SESSION_END = minutesFromNow(24);
}
const courseSession = {
  GPUSPAWNER_PROFILE: 'ml101-lab',
  GPUSPAWNER_GPU_SHARE: '1/4 of an RTX 4090, 6 GiB',
  GPUSPAWNER_CLASS_END: process.env.UI_TEST_CLASS_END,
  GPUSPAWNER_SESSION_END: process.env.UI_TEST_SESSION_END
};
const serverLog = path.join(artifactsDir, 'jupyterlab.log');

module.exports = {
  ...baseConfig,
  testDir: 'tests',
  outputDir: path.join(artifactsDir, 'results'),
  reporter: [
    ['list'],
    ['html', { open: 'never', outputFolder: path.join(artifactsDir, 'report') }]
  ],
  use: {
    ...baseConfig.use,
    baseURL,
    browserName: 'chromium',
    launchOptions: { executablePath: chromium },
    screenshot: 'only-on-failure',
    // Both need browser builds that Playwright downloads; Debian's Chromium has neither.
    trace: 'off',
    video: 'off'
  },
  webServer: {
    // The server's output goes to a file: child processes holding Playwright's pipe
    // open would keep the run from ending. `exec` lets SIGTERM reach JupyterLab itself.
    command: `mkdir -p "${artifactsDir}" && exec "${path.join(venvBin, 'jupyter')}" lab --config jupyter_server_test_config.py > "${serverLog}" 2>&1`,
    url: `${baseURL}/lab`,
    env: courseSession,
    timeout: 120 * 1000,
    reuseExistingServer: false,
    gracefulShutdown: { signal: 'SIGTERM', timeout: 10 * 1000 }
  }
};
