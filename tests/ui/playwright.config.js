/**
 * Browser tests of the JupyterLab side, in Debian's Chromium (no browser download).
 *
 * Playwright starts JupyterLab itself (webServer below) on a free port, with the Run as
 * Job extension as last built in labextension/: the galata tests (tests/, project
 * `jupyterlab`) drive it. It also starts the demo hub (hub_config/local/, through
 * jupyterhub_test_config.py) on free ports: the test through the hub (hub-tests/, project
 * `hub`) logs in, spawns a course server and runs a job there, with plain Playwright. And
 * it starts the same hub with campus single sign-on (hub_config/sso/, which runs the
 * stand-in campus identity provider): the `sso` project (sso-tests/) logs in through the
 * provider's form.
 * The hub as helm deploys it on a test cluster has a config of its own,
 * playwright.chart.config.js (project `chart`, chart-tests/), so that its minute of start
 * delays none of these.
 * Screenshots, failure artifacts and the HTML report go to test-artifacts/ui/ at the repository root.
 */
const { execFileSync } = require('child_process');
const path = require('path');
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');
const { galata } = require('@jupyterlab/galata');

const repoRoot = path.resolve(__dirname, '..', '..');
const venvBin = path.join(repoRoot, '.venv', 'bin');
// UI_ARTIFACTS_DIR, UI_HUB_RUNTIME, UI_SSO_RUNTIME: elsewhere, so that two runs on one
// machine (two engineers) do not remove each other's hub folders.
const artifactsDir =
  process.env.UI_ARTIFACTS_DIR || path.join(repoRoot, 'test-artifacts', 'ui');
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

// The demo hub (hub_config/local/), for the test through the hub (hub-tests/): its
// public port, job service, hub API and proxy API on free ports, picked once like the
// port above, and a fresh runtime folder at every run.
// The same for the hub with campus single sign-on (hub_config/sso/): its own ports, one
// more for the stand-in campus identity provider it starts.
if (!process.env.UI_HUB_PORTS) {
  const ports = execFileSync(path.join(venvBin, 'python'), [
    '-c',
    [
      'import socket',
      'socks = [socket.socket() for _ in range(11)]',
      '[s.bind(("127.0.0.1", 0)) for s in socks]',
      'print(",".join(str(s.getsockname()[1]) for s in socks))'
    ].join('\n')
  ])
    .toString()
    .trim()
    .split(',');
  process.env.UI_HUB_PORTS = ports.slice(0, 5).join(',');
  process.env.UI_SSO_PORTS = ports.slice(5).join(',');
}
const [hubPort, hubJobsPort, hubSessionsPort, hubApiPort, hubProxyApiPort] =
  process.env.UI_HUB_PORTS.split(',');
const hubURL = `http://127.0.0.1:${hubPort}`;
const hubRuntime =
  process.env.UI_HUB_RUNTIME || path.join(repoRoot, '.run', 'ui-hub-tests');
const hubLog = path.join(artifactsDir, 'demo-hub.log');
const hubConfig = path.join(__dirname, 'jupyterhub_test_config.py');
const [
  ssoPort,
  ssoJobsPort,
  ssoSessionsPort,
  ssoApiPort,
  ssoProxyApiPort,
  ssoIdpPort
] = process.env.UI_SSO_PORTS.split(',');
const ssoURL = `http://127.0.0.1:${ssoPort}`;
process.env.UI_SSO_IDP_URL = `http://127.0.0.1:${ssoIdpPort}`;
const ssoRuntime =
  process.env.UI_SSO_RUNTIME || path.join(repoRoot, '.run', 'ui-sso-tests');
const ssoLog = path.join(artifactsDir, 'sso-hub.log');

/** A demo hub as a webServer: output to a file, SIGTERM to JupyterHub itself. */
function demoHub(runtime, log, url, env) {
  return {
    // Output to a file: child processes holding Playwright's pipe open would keep the
    // run from ending. `exec` lets SIGTERM reach JupyterHub, which then stops the
    // single-user servers, the proxy and its services.
    command: `rm -rf "${runtime}" && mkdir -p "${runtime}" "${artifactsDir}" && cd "${runtime}" && exec "${path.join(venvBin, 'jupyterhub')}" -f "${hubConfig}" > "${log}" 2>&1`,
    url: `${url}/hub/api`,
    env: { GPUSPAWNER_DEMO_RUNTIME: runtime, ...env },
    timeout: 120 * 1000,
    reuseExistingServer: false,
    gracefulShutdown: { signal: 'SIGTERM', timeout: 20 * 1000 }
  };
}

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
  projects: [
    // JupyterLab on its own, driven with galata's fixtures.
    // Its tests switch themes with galata's setTheme (apputils:change-theme), which
    // would only turn off following the system's scheme, the environment's default
    // (jupyter-config/lab/settings/overrides.d/): they start with it off.
    {
      name: 'jupyterlab',
      testDir: 'tests',
      use: {
        mockSettings: {
          ...galata.DEFAULT_SETTINGS,
          '@jupyterlab/apputils-extension:themes': { 'adaptive-theme': false }
        }
      }
    },
    // JupyterLab behind the demo hub, with plain Playwright.
    { name: 'hub', testDir: 'hub-tests', use: { baseURL: hubURL } },
    // The demo hub with campus single sign-on: login through the provider's own form.
    { name: 'sso', testDir: 'sso-tests', use: { baseURL: ssoURL } }
  ],
  // UI_WEB_SERVERS=hub (a comma-separated subset of jupyterlab,hub,sso): start only
  // those, for a run of one project's tests.
  webServer: [
    {
      // The server's output goes to a file: child processes holding Playwright's pipe
      // open would keep the run from ending. `exec` lets SIGTERM reach JupyterLab itself.
      command: `mkdir -p "${artifactsDir}" && exec "${path.join(venvBin, 'jupyter')}" lab --config jupyter_server_test_config.py > "${serverLog}" 2>&1`,
      url: `${baseURL}/lab`,
      env: courseSession,
      timeout: 120 * 1000,
      reuseExistingServer: false,
      gracefulShutdown: { signal: 'SIGTERM', timeout: 10 * 1000 }
    },
    demoHub(hubRuntime, hubLog, hubURL, {
      GPUSPAWNER_DEMO_PORT: hubPort,
      GPUSPAWNER_DEMO_JOBS_PORT: hubJobsPort,
      GPUSPAWNER_DEMO_SESSIONS_PORT: hubSessionsPort,
      UI_HUB_API_PORT: hubApiPort,
      UI_HUB_PROXY_API_PORT: hubProxyApiPort
    }),
    demoHub(ssoRuntime, ssoLog, ssoURL, {
      UI_HUB_BASE_CONFIG: path.join(
        repoRoot,
        'hub_config',
        'sso',
        'jupyterhub_config.py'
      ),
      GPUSPAWNER_DEMO_PORT: ssoPort,
      GPUSPAWNER_DEMO_JOBS_PORT: ssoJobsPort,
      GPUSPAWNER_DEMO_SESSIONS_PORT: ssoSessionsPort,
      UI_HUB_API_PORT: ssoApiPort,
      UI_HUB_PROXY_API_PORT: ssoProxyApiPort,
      CAMPUS_IDP_PORT: ssoIdpPort
    })
  ].filter(
    (server, index) =>
      !process.env.UI_WEB_SERVERS ||
      process.env.UI_WEB_SERVERS.split(',').includes(
        ['jupyterlab', 'hub', 'sso'][index]
      )
  )
};
