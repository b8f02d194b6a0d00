// The audit log (admins only): who changed what, and what came of it.

import { errorBox, h, replace, table, when } from "../dom.js";

// A component's change names the component and the replica (process) that made it.
const who = (e) => (e.replica ? `${e.subject} @ ${e.replica}` : e.subject);
const changed = (e) => (e.changes || []).map((c) => `${c.verb} ${c.kind}/${c.namespace ? `${c.namespace}/` : ""}${c.name}`).join(", ");
// A component's record is written once its change is made: there is no HTTP status to show.
const result = (e) => (e.role === "component" ? "done" : String(e.result));

export default {
  id: "audit",
  title: "Audit log",
  nav: true,
  route: /^audit$/,
  visible: (session) => session.isAdmin,
  render(main, { session }) {
    const holder = h("div", { class: "scroll" }, h("p", { class: "muted" }, "Loading…"));
    replace(main, h("h1", {}, "Audit log"), holder);
    const since = new Date(Date.now() - 24 * 3600_000).toISOString();
    session.get("/api/v1/audit", { startTime: since, limit: 500 }).then((body) => {
      const items = body.items.slice().reverse();
      replace(holder, items.length
        ? table("Changes in the last 24 hours, newest first (at most 500)", ["Time", "Who", "Role", "Verb", "Path", "Result"],
          items.map((e) => h("tr", {}, h("td", {}, when(e.time)), h("td", {}, who(e)), h("td", {}, e.role),
            h("td", {}, e.verb), h("td", {}, e.path || changed(e)), h("td", { class: "num" }, result(e)))),
          { class: "data" })
        : h("p", { class: "muted" }, "No changes in the last 24 hours."));
    }).catch((err) => replace(holder, errorBox(err)));
    return null;
  },
};
