// The HTML pages people see at the campus sign-in service: the login form, the sign-out
// pages and the error pages. Everything that comes from a request or from the configuration
// goes through escapeHtml before it lands in a page.

export const WRONG_CREDENTIALS = 'Wrong user name or password.';

// Inline styles only: the pages load nothing from anywhere else.
const STYLE = `
  *{box-sizing:border-box}
  body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;
    font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;background:#eef1f5}
  main{width:min(26rem,calc(100% - 2rem));padding:2rem;background:#fff;border-radius:8px;
    box-shadow:0 1px 3px rgba(0,0,0,.2)}
  h1{margin:0 0 .25rem;font-size:1.5rem}
  p{margin:.5rem 0 1rem}
  label{display:block;margin-top:1rem;font-weight:600}
  input{display:block;width:100%;margin-top:.25rem;padding:.6rem;font:inherit;
    border:1px solid #6b7380;border-radius:4px}
  input:focus,button:focus,a:focus{outline:3px solid #1d5fbf;outline-offset:2px}
  button{margin-top:1.5rem;width:100%;padding:.7rem;font:inherit;font-weight:600;color:#fff;
    background:#1d5fbf;border:0;border-radius:4px;cursor:pointer}
  button:hover{background:#174c99}
  button.secondary{color:#1d5fbf;background:#fff;border:1px solid #1d5fbf;margin-top:.75rem}
  .error{padding:.6rem .8rem;color:#8a1c1c;background:#fdecec;border-left:4px solid #c62828}
  .note{margin-top:1.5rem;font-size:.85rem;color:#4b5260}
  a{color:#1d5fbf}
`;

export function escapeHtml(value) {
  return String(value ?? '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

/** A complete HTML document; `pageTitle` is plain text, `body` is HTML already escaped. */
export function htmlDocument(pageTitle, body) {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(pageTitle)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

/** A page that explains what happened and what to do next. */
export function messagePage({ title, heading, message, advice }) {
  return htmlDocument(`${heading} - ${title}`, `<h1>${escapeHtml(heading)}</h1>
<p>${escapeHtml(message)}</p>
${advice ? `<p>${escapeHtml(advice)}</p>` : ''}
<p class="note">${escapeHtml(title)}</p>`);
}

/**
 * The sign-in form of one interaction.
 *
 * `failed` shows the wrong-credentials message and keeps the typed `username`.
 */
export function loginPage({
  title, clientName, action, cancelAction, username = '', failed = false,
}) {
  const error = failed
    ? `<p class="error" id="login-error" role="alert">${escapeHtml(WRONG_CREDENTIALS)}</p>`
    : '';
  const describedBy = failed ? ' aria-describedby="login-error"' : '';
  // Focus lands where the person types next: the user name first, the password after a miss.
  const focusUser = failed ? '' : ' autofocus';
  const focusPassword = failed ? ' autofocus' : '';
  return htmlDocument(`Sign in - ${title}`, `<h1>${escapeHtml(title)}</h1>
<p>Sign in to continue to <strong>${escapeHtml(clientName)}</strong>.</p>
${error}
<form method="post" action="${escapeHtml(action)}">
<label for="username">User name</label>
<input id="username" name="username" type="text" value="${escapeHtml(username)}" autocomplete="username" autocapitalize="none" spellcheck="false" required${describedBy}${focusUser}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required${describedBy}${focusPassword}>
<button type="submit">Sign in</button>
</form>
<form method="post" action="${escapeHtml(cancelAction)}">
<button type="submit" class="secondary">Cancel</button>
</form>
<p class="note">A stand-in for the campus identity provider, for demonstrations and tests.</p>`);
}

/** oidc-provider's renderError: its own errors (a bad client_id, an expired request, ...). */
export function renderErrorPage(title) {
  return async function renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = messagePage({
      title,
      heading: 'Sign-in could not continue',
      message: out.error_description || out.error || 'The request could not be processed.',
      advice: 'Go back to the application you came from and sign in again. If this keeps happening, tell the people who run the application.',
    });
  };
}

/** oidc-provider's rpInitiatedLogout.logoutSource: confirm signing out of this service. */
export function logoutConfirmPage(title) {
  return async function logoutSource(ctx, form) {
    ctx.type = 'html';
    // `form` is oidc-provider's hidden form (id "op.logoutForm") carrying its xsrf token.
    ctx.body = htmlDocument(`Sign out - ${title}`, `<h1>${escapeHtml(title)}</h1>
<p>Do you want to sign out of the campus sign-in service?</p>
${form}
<button type="submit" form="op.logoutForm" name="logout" value="yes" autofocus>Sign out</button>
<button type="submit" form="op.logoutForm" class="secondary">Stay signed in</button>`);
  };
}

/** oidc-provider's rpInitiatedLogout.postLogoutSuccessSource. */
export function signedOutPage(title) {
  return async function postLogoutSuccessSource(ctx) {
    ctx.type = 'html';
    ctx.body = messagePage({
      title,
      heading: 'Signed out',
      message: 'You have signed out of the campus sign-in service.',
      advice: 'The next sign-in asks for a user name and password again.',
    });
  };
}
