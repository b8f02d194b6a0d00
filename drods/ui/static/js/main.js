// Start-up, sign-in, the page frame and the hash router. Views are modules listed in views/index.js.

import { Session, tokenOf } from "./api.js";
import { h, replace } from "./dom.js";
import { CLUSTERS, Live } from "./live.js";
import { VIEWS } from "./views/index.js";

const app = document.getElementById("app");
let current = null; // {session, live, cleanup}

function showLogin(message) {
  const error = h("p", { class: "error", role: "alert", id: "login-error" }, message || "");
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", required: true,
                             spellcheck: "false", "aria-describedby": "token-help login-error" });
  const form = h("form", { class: "login", onsubmit: (e) => { e.preventDefault(); signIn(input.value.trim(), error); } },
    h("h1", {}, "DRO-DS"),
    h("label", { for: "token" }, "Access token"),
    input,
    h("p", { id: "token-help", class: "muted" },
      "A token from `drods token create`, or your DRO-DS kubeconfig pasted whole. It is kept in this tab only."),
    h("button", { type: "submit" }, "Sign in"),
    error);
  replace(app, h("main", { id: "main", class: "login-page" }, form));
  input.focus();
}

// Why a token cannot sign in, before asking the server (null: it may try); a restored tab is judged alike.
function refusal(session) {
  if (!session.role) return "This is not a DRO-DS token.";
  if (session.role === "cluster-agent") return "A cluster agent's token cannot sign in here.";
  if (session.namespaces) {  // the dashboard reads the whole fleet: clusters and Bindings are cluster-scoped
    return `This token acts only in namespace(s) ${session.namespaces.join(", ")}. The dashboard shows ` +
      "the whole fleet and needs a cluster-wide token (a viewer token will do: drods token create --role viewer); " +
      "use kubectl with this one.";
  }
  return null;
}

async function signIn(text, error) {
  const session = new Session(tokenOf(text));
  const refused = refusal(session);
  if (refused) { error.textContent = refused; return; }
  try {
    await session.get(CLUSTERS, { fieldSelector: "metadata.name=~none~" });
  } catch (err) {
    error.textContent = err.status === 401 ? "The server does not accept this token." : `Sign-in failed: ${err.message}`;
    return;
  }
  session.save();
  start(session);
}

function signOut(message) {
  if (current) { current.cleanup && current.cleanup(); current.live.stop(); current = null; }
  Session.clear();
  history.replaceState(null, "", "#/");
  showLogin(message);
}

function start(session) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite", id: "status" });
  const live = new Live(session, (err) => {
    if (err === null) status.textContent = "Live updates resumed.";
    else if (err.status === 401) signOut("Your token is no longer accepted; sign in again.");
    else status.textContent = `Live updates interrupted (${err.message}); reconnecting…`;
  }).start();
  const nav = h("nav", { "aria-label": "Main" },
    h("ul", {}, VIEWS.filter((v) => v.nav && v.visible(session)).map((v) =>
      h("li", {}, h("a", { href: `#/${v.id}`, dataset: { view: v.id } }, v.title)))));
  const main = h("main", { id: "main", tabindex: "-1" });
  replace(app,
    h("header", { class: "top" },
      h("span", { class: "brand" }, "DRO-DS"),
      nav,
      h("span", { class: "account" },
        h("span", { class: "who" }, h("span", { class: "subject", title: session.subject }, session.subject), " · ",
          h("strong", { id: "role" }, session.role)),
        h("button", { type: "button", class: "secondary", onclick: () => signOut("Signed out.") }, "Sign out"))),
    status,
    main);
  current = { session, live, cleanup: null };
  let said = null;
  const ctx = {
    session, live,
    // what an action did: said until the next page, where it would read as that page's news (a cordon
    // said on a cluster's page, undone since elsewhere, stayed "… cordoned" on every page)
    say: (text) => { status.textContent = text; said = text; },
    go: (path) => { location.hash = `#/${path}`; },
  };
  const route = () => {
    if (!current) return;
    const path = decodeURIComponent(location.hash.replace(/^#\/?/, "")) || "fleet";
    let view = null;
    let params = [];
    for (const v of VIEWS) {
      const m = v.visible(session) && path.match(v.route);
      if (m) { view = v; params = m.slice(1); break; }
    }
    if (current.cleanup) current.cleanup();
    current.cleanup = null;
    if (said !== null && status.textContent === said) status.textContent = "";
    said = null;
    for (const a of nav.querySelectorAll("a")) {
      if (view && a.dataset.view === (view.section || view.id)) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    if (!view) {
      const hidden = VIEWS.find((v) => !v.visible(session) && path.match(v.route));
      replace(main, hidden
        ? [h("h1", {}, hidden.title), h("p", {}, `This page is for admins; your token's role is ${session.role}. `,
                                         h("a", { href: "#/fleet" }, "Back to the fleet"))]
        : [h("h1", {}, "Not found"), h("p", {}, `Nothing at “${path}”. `, h("a", { href: "#/fleet" }, "Back to the fleet"))]);
      return;
    }
    replace(main);
    document.title = `${view.title} · DRO-DS`;
    current.cleanup = view.render(main, ctx, params) || null;
    // A new page: keyboard and screen-reader users start at its content (a nav link keeps focus).
    if (!nav.contains(document.activeElement)) {
      window.scrollTo(0, 0);
      main.focus({ preventScroll: true });
    }
  };
  window.onhashchange = route;
  route();
}

const restored = Session.restore();
if (restored && !refusal(restored)) start(restored);
else {
  if (restored) Session.clear();
  showLogin(restored ? refusal(restored) : undefined);
}
