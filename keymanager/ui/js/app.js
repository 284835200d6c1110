// The console's shell: sign-in, the session (in memory), the banner and the router (#/keys, ...).

import { ApiError, call, forget, get, useToken, whenSignedOut } from "./api.js";
import { h, notice } from "./dom.js";
import { approvalsPage } from "./pages/approvals.js";
import { auditPage } from "./pages/audit.js";
import { keyPage } from "./pages/key.js";
import { keysPage } from "./pages/keys.js";
import { principalsPage } from "./pages/principals.js";
import { servicePage } from "./pages/service.js";
import { signInPage } from "./pages/signin.js";

const CONSOLE_ROLES = ["admin", "auditor"];
const ROUTES = [
  [/^#\/keys$/, "keys", keysPage],
  [/^#\/keys\/([^/?]+)$/, "keys", keyPage],
  [/^#\/principals$/, "principals", principalsPage],
  [/^#\/approvals(?:\?state=[a-z]+)?$/, "approvals", approvalsPage],
  [/^#\/audit$/, "audit", auditPage],
  [/^#\/service$/, "service", servicePage],
];

/** The signed-in principal ({name, role, ...}) or null; `facts`: what /ui/console.json says. */
const state = { principal: null, facts: {}, reason: null, refused: false };

const main = document.getElementById("main");

/** What a page is given: the principal, whether it may change things, and how to re-render. */
function context() {
  return { principal: state.principal, admin: state.principal?.role === "admin", facts: state.facts, rerender: render };
}

/** Sign in with `token` (null: the browser's client certificate); the reason it failed, else null. */
async function signIn(token) {
  useToken(token);
  let principal;
  try {
    principal = await get("/v1/whoami");
  } catch (error) {
    forget();
    if (error instanceof ApiError && error.status === 401) {
      return token
        ? `The service refused this token (${error.code}: ${error.message}).`
        : `The service did not accept a client certificate from this browser (${error.code}).`;
    }
    return `Sign-in failed: ${error.message}`;
  }
  if (!CONSOLE_ROLES.includes(principal.role)) {
    forget();
    return `The console is for admin and auditor principals; ${principal.name} is an ${principal.role} principal.`;
  }
  state.principal = principal;
  state.reason = null;
  showSession();
  if (!location.hash.startsWith("#/") || location.hash === "#/signin") location.hash = "#/keys";
  else await render();
  return null;
}

/** Back to the sign-in page saying `reason` (`refused`: the service refused the credential). */
function signOut(reason, refused = true) {
  forget();
  state.principal = null;
  state.reason = reason;
  state.refused = refused;
  showSession();
  if (location.hash !== "#/signin") location.hash = "#/signin";
  else render();
}

function showSession() {
  const signedIn = state.principal !== null;
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("who").hidden = !signedIn;
  document.getElementById("who-name").textContent = signedIn ? `${state.principal.name} (${state.principal.role})` : "";
}

function markSection(section) {
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.section === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

async function render() {
  if (state.principal === null) {
    markSection(null);
    document.title = "Sign in · keymanager console";
    main.replaceChildren(signInPage({ facts: state.facts, reason: state.reason, refused: state.refused, signIn }));
    main.querySelector("input, button")?.focus();
    return;
  }
  const found = ROUTES.map(([pattern, section, page]) => [location.hash.match(pattern), section, page]).find(
    ([m]) => m,
  );
  if (!found) {
    location.hash = "#/keys";
    return;
  }
  const [match, section, page] = found;
  markSection(section);
  main.replaceChildren(h("p", { class: "loading", role: "status" }, "Loading…"));
  try {
    const content = await page(context(), ...match.slice(1).map(decodeURIComponent));
    if (state.principal === null) return; // signed out meanwhile
    main.replaceChildren(content);
  } catch (error) {
    if (state.principal === null) return;
    main.replaceChildren(h("h1", { tabindex: "-1" }, "Something went wrong"), notice(`${error.message}`, "error"));
  }
  const heading = main.querySelector("h1");
  document.title = `${heading ? heading.textContent : "keymanager"} · keymanager console`;
  heading?.setAttribute("tabindex", "-1");
  heading?.focus();
}

async function start() {
  whenSignedOut((reason) => {
    if (state.principal !== null) signOut(reason);
  });
  document.getElementById("sign-out").addEventListener("click", () => signOut("You signed out.", false));
  document.getElementById("skip").addEventListener("click", (event) => {
    event.preventDefault();
    main.focus();
  });
  window.addEventListener("hashchange", () => {
    if (location.hash.startsWith("#/")) render();
  });
  try {
    state.facts = (await call("GET", "/ui/console.json")).data ?? {};
  } catch {
    state.facts = {};
  }
  if (state.facts.development_tls) {
    const banner = document.getElementById("banner");
    banner.textContent =
      "Development TLS: this service presents the certificate keymanager init made, signed by its development CA (var/tls/ca.pem). Do not use it in production.";
    banner.hidden = false;
  }
  await render();
}

start();
