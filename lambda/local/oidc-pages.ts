/**
 * The pages of the local identity provider: server-rendered HTML with an external stylesheet and no
 * script at all, so that `Content-Security-Policy: default-src 'self'` holds on them too.
 */

export const STYLESHEET_PATH = "/oidc/assets/oidc.css";

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (ch) => ESCAPES[ch] ?? ch);
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · dmt</title>
<link rel="icon" href="/dashboard/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${STYLESHEET_PATH}">
</head>
<body>
<main class="card">
<div class="brand"><span class="logo" aria-hidden="true">d</span><span>dmt</span><span class="tag">local identity provider</span></div>
${body}
</main>
</body>
</html>`;
}

export function loginPage(options: { uid: string; email?: string; error?: string }): string {
  const action = `/oidc/interaction/${encodeURIComponent(options.uid)}`;
  const error = options.error
    ? `<p class="error" role="alert" id="login-error">${escapeHtml(options.error)}</p>`
    : "";
  const described = options.error ? ' aria-describedby="login-error"' : "";
  return page(
    "Sign in",
    `<h1>Sign in to the dashboard</h1>
<p class="muted">Use the development user that <code>npm start</code> printed.</p>
${error}
<form method="post" action="${action}/login">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required autofocus value="${escapeHtml(options.email ?? "")}"${described}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required${described}>
<button type="submit">Sign in</button>
</form>
<p class="footer"><a href="${action}/abort">Cancel</a></p>`,
  );
}

/** `form` is the provider's own hidden form (with its anti-forgery token) that the buttons submit. */
export function logoutPage(form: string): string {
  return page(
    "Sign out",
    `<h1>Sign out?</h1>
<p class="muted">This ends your session with the local identity provider.</p>
${form}
<button type="submit" form="op.logoutForm" name="logout" value="yes" autofocus>Yes, sign me out</button>
<button type="submit" form="op.logoutForm" class="secondary">No, stay signed in</button>`,
  );
}

export function signedOutPage(): string {
  return page(
    "Signed out",
    `<h1>You are signed out</h1>
<p class="muted">Your session with the local identity provider has ended.</p>
<p class="footer"><a href="/dashboard/">Back to the dashboard</a></p>`,
  );
}

export function errorPage(title: string, message: string): string {
  return page(
    title,
    `<h1>${escapeHtml(title)}</h1>
<p class="error" role="alert">${escapeHtml(message)}</p>
<p class="footer"><a href="/dashboard/">Back to the dashboard</a></p>`,
  );
}

export const STYLESHEET = `
*{box-sizing:border-box}
body{margin:0;min-height:100vh;display:grid;place-items:center;background:#f4f5f7;color:#1d2330;
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.card{width:min(400px,calc(100vw - 32px));background:#fff;border:1px solid #e3e6eb;border-radius:12px;
padding:32px;box-shadow:0 8px 24px rgba(20,30,50,.06)}
.brand{display:flex;align-items:center;gap:8px;font-weight:700;font-size:17px;margin-bottom:24px}
.logo{display:inline-grid;place-items:center;width:28px;height:28px;border-radius:7px;background:#4f46e5;color:#fff}
.tag{margin-left:auto;font-size:11px;font-weight:600;text-transform:uppercase;letter-spacing:.04em;color:#8a5a00;
background:#fff4db;border-radius:999px;padding:2px 8px}
h1{font-size:20px;margin:0 0 4px}
.muted{color:#5b6475;margin:0 0 20px}
label{display:block;font-weight:600;font-size:13px;margin:14px 0 6px}
input{width:100%;font:inherit;padding:9px 11px;border:1px solid #cfd4dc;border-radius:8px;background:#fff}
input:focus,button:focus-visible,a:focus-visible{outline:3px solid #a5b4fc;outline-offset:1px}
button{display:block;width:100%;margin-top:20px;font:inherit;font-weight:600;padding:10px 14px;border:0;
border-radius:8px;background:#4f46e5;color:#fff;cursor:pointer}
button:hover{background:#4338ca}
button.secondary{margin-top:10px;background:#fff;color:#1d2330;border:1px solid #cfd4dc}
button.secondary:hover{background:#f4f5f7}
.error{color:#b42318;background:#fef3f2;border:1px solid #fecdca;border-radius:8px;padding:10px 12px}
.footer{margin:20px 0 0;text-align:center}
a{color:#4f46e5}
code{font-size:13px;background:#f1f2f5;border-radius:4px;padding:1px 5px}
`;
