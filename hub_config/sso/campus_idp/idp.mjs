// A stand-in for the campus identity provider: a real OpenID Connect provider (oidc-provider)
// with a login form, users from a JSON file and a `groups` claim. For the demo and the tests;
// not for production (keys, sessions and grants live in memory and vanish on exit).
//
//   node hub_config/sso/campus_idp/idp.mjs --config campus_idp.json
//
// See README.md next to this file for the configuration format.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';

import { CampusDirectory, CLAIMS_BY_SCOPE } from './accounts.mjs';
import { ConfigError, loadConfig } from './config.mjs';
import { interactionHandler } from './interactions.mjs';
import {
  htmlDocument, logoutConfirmPage, renderErrorPage, signedOutPage,
} from './pages.mjs';

const STOP_GRACE_MS = 2000;
const HOUR = 60 * 60;

function log(message) {
  process.stderr.write(`campus-idp: ${message}\n`);
}

function fail(message, exitCode) {
  log(message);
  process.exit(exitCode);
}

function generateSigningKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), use: 'sig', alg: 'RS256' };
}

// Every configured client is first-party (the hub), so it gets what it asks for without a
// consent page: the grant is created, or widened, here instead of in a consent prompt.
async function grantWithoutConsent(ctx) {
  const { oidc } = ctx;
  const grantId = oidc.result?.consent?.grantId || oidc.session.grantIdFor(oidc.client.clientId);
  const existing = grantId ? await oidc.provider.Grant.find(grantId) : undefined;
  const grant = existing ?? new oidc.provider.Grant({
    accountId: oidc.account.accountId,
    clientId: oidc.client.clientId,
  });
  grant.addOIDCScope([...oidc.requestParamOIDCScopes].join(' '));
  if (oidc.requestParamClaims.size > 0) {
    grant.addOIDCClaims([...oidc.requestParamClaims]);
  }
  await grant.save();
  return grant;
}

function providerConfiguration(config, directory) {
  return {
    clients: config.clients.map((client) => ({
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      ...client,
    })),
    claims: CLAIMS_BY_SCOPE,
    scopes: ['openid'],
    responseTypes: ['code'],
    // Profile claims in the ID token too, not only from userinfo: clients may read either.
    conformIdTokenClaims: false,
    findAccount: directory.findAccount,
    loadExistingGrant: grantWithoutConsent,
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    jwks: config.jwks ?? { keys: [generateSigningKey()] },
    cookies: {
      // Random per start: a restart signs everybody out, which is what a demo wants.
      keys: [randomBytes(32).toString('base64url')],
      // Every loopback server shares one cookie jar per host (ports do not count), so the
      // names say whose cookies these are.
      names: {
        session: 'campus_idp_session',
        interaction: 'campus_idp_interaction',
        resume: 'campus_idp_interaction_resume',
      },
    },
    ttl: {
      AccessToken: HOUR,
      AuthorizationCode: 60,
      IdToken: HOUR,
      Interaction: 10 * 60,
      Session: 8 * HOUR,
      Grant: 8 * HOUR,
    },
    // The hub talks to the provider from its server, never from a browser script.
    clientBasedCORS: () => false,
    renderError: renderErrorPage(config.title),
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: logoutConfirmPage(config.title),
        postLogoutSuccessSource: signedOutPage(config.title),
      },
      userinfo: { enabled: true },
    },
  };
}

function logProviderErrors(provider) {
  provider.on('server_error', (_ctx, error) => log(`internal error: ${error.stack ?? error}`));
  for (const event of ['authorization.error', 'grant.error', 'userinfo.error']) {
    provider.on(event, (_ctx, error) => {
      log(`${event}: ${error.error} (${error.error_description ?? 'no description'})`);
    });
  }
}

function createServer(config, provider, directory) {
  const handleProvider = provider.callback();
  const handleInteraction = interactionHandler({
    provider, directory, title: config.title, log,
  });

  return http.createServer(async (req, res) => {
    const started = performance.now();
    // The path only: query strings carry codes and state that do not belong in a log.
    const path = new URL(req.url, config.issuer).pathname;
    res.on('finish', () => {
      log(`${req.method} ${path} ${res.statusCode} ${Math.round(performance.now() - started)}ms`);
    });
    try {
      if (!(await handleInteraction(req, res))) {
        await handleProvider(req, res);
      }
    } catch (error) {
      log(`error answering ${req.method} ${path}: ${error.stack ?? error}`);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      res.writeHead(500, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end(htmlDocument(`Sign-in failed - ${config.title}`, `<h1>Sign-in failed</h1>
<p>Something went wrong at the campus sign-in service.</p>
<p>Go back to the application you came from and try again in a moment.</p>`));
    }
  });
}

function stopOnSignals(server) {
  let stopping = false;
  const stop = (signal) => {
    if (stopping) {
      return;
    }
    stopping = true;
    log(`${signal} received; closing every connection and exiting`);
    server.close(() => {
      log('stopped');
      process.exit(0);
    });
    // Connections in the middle of a request (or kept alive by a client) would otherwise
    // hold close() open until they time out, and test teardown would wait for them.
    server.closeAllConnections();
    setTimeout(() => {
      log(`connections still open after ${STOP_GRACE_MS} ms; exiting anyway`);
      process.exit(0);
    }, STOP_GRACE_MS).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

async function main() {
  let options;
  try {
    ({ values: options } = parseArgs({ options: { config: { type: 'string' } } }));
  } catch (error) {
    fail(`${error.message}. Usage: node idp.mjs --config <file.json>`, 2);
  }
  if (!options.config) {
    fail('Usage: node idp.mjs --config <file.json> (see README.md for the format).', 2);
  }

  let config;
  try {
    config = await loadConfig(options.config);
  } catch (error) {
    if (error instanceof ConfigError) {
      fail(error.message, 2);
    }
    throw error;
  }

  const directory = new CampusDirectory(config.users);
  const provider = new Provider(config.issuer, providerConfiguration(config, directory));
  logProviderErrors(provider);

  const server = createServer(config, provider, directory);
  stopOnSignals(server);
  server.on('error', (error) => fail(`Cannot listen on ${config.host}:${config.port}: ${error.message}.`, 1));
  server.listen(config.port, config.host, () => {
    process.stdout.write(`campus-idp ready at ${config.issuer}\n`);
  });
}

await main();
