// Reads and checks the JSON configuration of the stand-in campus identity provider.
//
// Every problem is reported as a ConfigError whose message says what to fix, so that the
// launcher can print it and exit instead of failing later inside oidc-provider.

import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';

export const DEFAULT_TITLE = 'Campus login (demo)';

export class ConfigError extends Error {}

async function readJson(path, what) {
  let text;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`Cannot read the ${what} ${path}: ${error.message}.`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`The ${what} ${path} is not valid JSON: ${error.message}.`);
  }
}

function isNonEmptyString(value) {
  return typeof value === 'string' && value.length > 0;
}

function checkIssuer(issuer) {
  let url;
  try {
    url = new URL(issuer);
  } catch {
    throw new ConfigError(`"issuer" must be an absolute http(s) URL such as "http://127.0.0.1:5556"; got ${JSON.stringify(issuer)}.`);
  }
  if (!['http:', 'https:'].includes(url.protocol)) {
    throw new ConfigError(`"issuer" must use http or https; got ${JSON.stringify(issuer)}.`);
  }
  // The provider serves its endpoints at the root of its own server, so the issuer is an
  // origin; a path would need a reverse proxy that this demo does not have.
  if (url.pathname !== '/' || url.search || url.hash) {
    throw new ConfigError(`"issuer" must be an origin without a path, such as "http://127.0.0.1:5556"; got ${JSON.stringify(issuer)}.`);
  }
  return url;
}

function checkClient(client, index) {
  const where = `clients[${index}]`;
  if (client === null || typeof client !== 'object' || Array.isArray(client)) {
    throw new ConfigError(`${where} must be an object with client_id, client_secret and redirect_uris.`);
  }
  for (const key of ['client_id', 'client_secret']) {
    if (!isNonEmptyString(client[key])) {
      throw new ConfigError(`${where} needs a non-empty "${key}".`);
    }
  }
  const uris = client.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || !uris.every(isNonEmptyString)) {
    throw new ConfigError(`${where} ("${client.client_id}") needs "redirect_uris", a non-empty list of URLs such as "http://127.0.0.1:8000/hub/oauth_callback".`);
  }
  return client;
}

function checkUser(user, index, source) {
  const where = `users[${index}] in ${source}`;
  if (user === null || typeof user !== 'object' || Array.isArray(user)) {
    throw new ConfigError(`${where} must be an object with username, password, name, email and groups.`);
  }
  for (const key of ['username', 'password']) {
    if (!isNonEmptyString(user[key])) {
      throw new ConfigError(`${where} needs a non-empty "${key}".`);
    }
  }
  for (const key of ['name', 'email']) {
    if (user[key] !== undefined && typeof user[key] !== 'string') {
      throw new ConfigError(`${where} ("${user.username}"): "${key}" must be a string.`);
    }
  }
  const groups = user.groups ?? [];
  if (!Array.isArray(groups) || !groups.every(isNonEmptyString)) {
    throw new ConfigError(`${where} ("${user.username}"): "groups" must be a list of group names.`);
  }
  return {
    username: user.username,
    password: user.password,
    name: user.name ?? user.username,
    email: user.email,
    email_verified: user.email_verified ?? true,
    groups,
  };
}

async function loadUsers(raw, configPath) {
  if (raw.users !== undefined && raw.users_file !== undefined) {
    throw new ConfigError('Give either "users" or "users_file" in the configuration, not both.');
  }
  let list;
  let source;
  if (raw.users_file !== undefined) {
    if (!isNonEmptyString(raw.users_file)) {
      throw new ConfigError('"users_file" must be a path to a JSON list of users.');
    }
    source = resolve(dirname(configPath), raw.users_file);
    list = await readJson(source, 'users file');
  } else {
    source = configPath;
    list = raw.users;
  }
  if (!Array.isArray(list) || list.length === 0) {
    throw new ConfigError(`The configuration needs at least one user: a list in "users", or in the file named by "users_file" (read from ${source}).`);
  }
  const users = list.map((user, index) => checkUser(user, index, source));
  const seen = new Set();
  for (const { username } of users) {
    if (seen.has(username)) {
      throw new ConfigError(`The user name "${username}" appears twice in ${source}; user names must be unique.`);
    }
    seen.add(username);
  }
  return users;
}

/**
 * Load the configuration file at `configPath`.
 *
 * Returns { issuer, host, port, clients, users, title, jwks }; host defaults to 127.0.0.1
 * and port to the issuer's port.
 */
export async function loadConfig(configPath) {
  const raw = await readJson(configPath, 'configuration file');
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError(`The configuration file ${configPath} must hold a JSON object.`);
  }
  const issuerUrl = checkIssuer(raw.issuer);
  const port = raw.port ?? Number(issuerUrl.port || (issuerUrl.protocol === 'https:' ? 443 : 80));
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new ConfigError(`"port" must be a TCP port number; got ${JSON.stringify(raw.port)}.`);
  }
  const host = raw.host ?? '127.0.0.1';
  if (!isNonEmptyString(host)) {
    throw new ConfigError(`"host" must be an address to listen on, such as "127.0.0.1"; got ${JSON.stringify(raw.host)}.`);
  }
  if (!Array.isArray(raw.clients) || raw.clients.length === 0) {
    throw new ConfigError('"clients" must list at least one client (the hub), with client_id, client_secret and redirect_uris.');
  }
  const clients = raw.clients.map(checkClient);
  const title = raw.title ?? DEFAULT_TITLE;
  if (!isNonEmptyString(title)) {
    throw new ConfigError('"title" must be a non-empty string.');
  }
  if (raw.jwks !== undefined && !Array.isArray(raw.jwks?.keys)) {
    throw new ConfigError('"jwks" must be a JSON Web Key Set with private signing keys: {"keys": [...]}.');
  }
  return {
    issuer: issuerUrl.origin,
    host,
    port,
    clients,
    users: await loadUsers(raw, configPath),
    title,
    jwks: raw.jwks,
  };
}
