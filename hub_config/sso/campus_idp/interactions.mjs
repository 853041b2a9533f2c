// The login step of an authorization request: oidc-provider sends the browser to
// /interaction/<uid>; these handlers show the form, check the password and hand the result
// back to oidc-provider, which then redirects to the client with the code.

import { errors } from 'oidc-provider';

import { loginPage, messagePage, WRONG_CREDENTIALS } from './pages.mjs';

const ROUTE = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login|abort))?$/;
const MAX_FORM_BYTES = 16 * 1024;

// Our pages load nothing and may not be framed; form-action stays open because browsers
// apply it to the redirect back to the client after the form is sent.
const SECURITY_HEADERS = {
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

class FormTooLarge extends Error {}

function sendHtml(res, status, html) {
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'text/html; charset=utf-8' });
  res.end(html);
}

async function readForm(req) {
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) {
      throw new FormTooLarge();
    }
    chunks.push(chunk);
  }
  if (type !== 'application/x-www-form-urlencoded') {
    return new URLSearchParams();
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/**
 * A request handler for /interaction/... that answers the request and returns true, or
 * returns false for any other path (oidc-provider's own routes).
 */
export function interactionHandler({ provider, directory, title, log }) {
  const expiredPage = () => messagePage({
    title,
    heading: 'This sign-in page has expired',
    message: 'The sign-in request was already finished, cancelled, or waited too long.',
    advice: 'Go back to the application you came from and sign in again.',
  });

  async function clientName(clientId) {
    const client = await provider.Client.find(clientId);
    return client?.clientName || clientId;
  }

  async function showForm(req, res, details, { username, failed }) {
    const base = `/interaction/${details.uid}`;
    sendHtml(res, failed ? 401 : 200, loginPage({
      title,
      clientName: await clientName(details.params.client_id),
      action: `${base}/login`,
      cancelAction: `${base}/abort`,
      username,
      failed,
    }));
  }

  async function login(req, res, details) {
    let form;
    try {
      form = await readForm(req);
    } catch (error) {
      if (error instanceof FormTooLarge) {
        sendHtml(res, 413, messagePage({
          title, heading: 'Sign-in form too large', message: 'The form sent was too large to read.', advice: 'Go back and sign in again.',
        }));
        return;
      }
      throw error;
    }
    const username = form.get('username') ?? '';
    const user = directory.authenticate(username, form.get('password') ?? '');
    if (!user) {
      log(`sign-in refused for user name ${JSON.stringify(username)}: ${WRONG_CREDENTIALS}`);
      await showForm(req, res, details, { username, failed: true });
      return;
    }
    log(`${JSON.stringify(user.username)} signed in for client ${JSON.stringify(details.params.client_id)}`);
    // Consent is not asked: every configured client is first-party (see loadExistingGrant).
    await provider.interactionFinished(req, res, {
      login: { accountId: user.username, amr: ['pwd'] },
    }, { mergeWithLastSubmission: false });
  }

  return async function handleInteraction(req, res) {
    const match = ROUTE.exec(new URL(req.url, 'http://campus-idp.invalid').pathname);
    if (!match) {
      return false;
    }
    const [, uid, action] = match;
    const method = action ? 'POST' : 'GET';
    if (req.method !== method) {
      res.writeHead(405, { ...SECURITY_HEADERS, Allow: method, 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(`Use ${method} here.\n`);
      return true;
    }

    let details;
    try {
      details = await provider.interactionDetails(req, res);
    } catch (error) {
      if (error instanceof errors.SessionNotFound) {
        sendHtml(res, 400, expiredPage());
        return true;
      }
      throw error;
    }
    // The interaction cookie belongs to the newest sign-in of this browser; an older page
    // (another tab, the back button) points at an interaction that is no longer current.
    if (details.uid !== uid) {
      sendHtml(res, 400, expiredPage());
      return true;
    }
    if (details.prompt.name !== 'login') {
      // Consent is granted in loadExistingGrant, so only the login prompt reaches this page.
      sendHtml(res, 400, messagePage({
        title,
        heading: 'Sign-in could not continue',
        message: `This service cannot answer the ${details.prompt.name} step of a sign-in.`,
        advice: 'Go back to the application you came from and sign in again.',
      }));
      return true;
    }

    if (action === 'login') {
      await login(req, res, details);
    } else if (action === 'abort') {
      log(`sign-in cancelled for client ${JSON.stringify(details.params.client_id)}`);
      await provider.interactionFinished(req, res, {
        error: 'access_denied',
        error_description: 'The user cancelled the sign-in.',
      }, { mergeWithLastSubmission: false });
    } else {
      await showForm(req, res, details, { username: '', failed: false });
    }
    return true;
  };
}
