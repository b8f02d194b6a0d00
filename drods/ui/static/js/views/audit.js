// The audit log (admins only): who changed what, and what came of it — filtered by subject, kind,
// namespace and time window (the API's own filters: GET /api/v1/audit?subject&kind&namespace&startTime&endTime).

import { errorBox, h, replace, table, when } from "../dom.js";

// A component's change names the component and the replica (process) that made it.
const who = (e) => (e.replica ? `${e.subject} @ ${e.replica}` : e.subject);
const changed = (e) => (e.changes || []).map((c) => `${c.verb} ${c.kind}/${c.namespace ? `${c.namespace}/` : ""}${c.name}`).join(", ");
// What a request changed, or — refused — why (the error's code and message, as `drods audit` prints it).
const outcome = (e) => {
  const said = e.result >= 400 ? e.message || "" : changed(e);
  return e.dryRun ? `(dry run) ${said}` : said;
};
// A component's record is written once its change is made: there is no HTTP status to show.
const result = (e) => (e.role === "component" ? "done" : String(e.result));

function input(label, name, attrs = {}) {
  return h("label", { class: "field" }, h("span", {}, label), h("input", { name, ...attrs }));
}

const iso = (local) => (local ? new Date(local).toISOString() : null);

export default {
  id: "audit",
  title: "Audit log",
  nav: true,
  route: /^audit$/,
  visible: (session) => session.isAdmin,
  render(main, { session }) {
    const holder = h("div", { "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
    const form = h("form", { class: "filters", "aria-label": "Filter the audit log" },
      input("Subject", "subject"), input("Kind", "kind", { placeholder: "Deployment" }), input("Namespace", "namespace"),
      input("From", "from", { type: "datetime-local" }), input("To", "to", { type: "datetime-local" }),
      h("button", { type: "submit" }, "Filter"));
    replace(main, h("h1", {}, "Audit log"), form, holder);
    const load = async () => {
      const f = form.elements;
      const params = { limit: 500, startTime: iso(f.from.value) || new Date(Date.now() - 24 * 3600_000).toISOString() };
      if (f.to.value) params.endTime = iso(f.to.value);
      if (params.endTime && params.endTime < params.startTime) {
        replace(holder, errorBox(new Error(f.from.value ? "“From” is after “To”: no change can match; swap them."
          : "“To” is before the default start (24 hours ago): set “From” too.")));
        return;
      }
      for (const k of ["subject", "kind", "namespace"]) if (f[k].value.trim()) params[k] = f[k].value.trim();
      try {
        const body = await session.get("/api/v1/audit", params);
        const items = body.items.slice().reverse();
        replace(holder, items.length
          ? table(`Changes since ${when(params.startTime)}, newest first (at most 500)`, ["Time", "Who", "Role", "Verb", "Path", "Result", "Changes or reason"],
            items.map((e) => h("tr", {}, h("td", {}, when(e.time)), h("td", {}, who(e)), h("td", {}, e.role),
              h("td", {}, e.verb), h("td", {}, e.path || "—"), h("td", { class: "num" }, result(e)),
              h("td", {}, outcome(e)))),
            { class: "data", dataset: { testid: "audit" } })
          : h("p", { class: "muted" }, "No change matches."));
      } catch (err) { replace(holder, errorBox(err)); }
    };
    form.addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
    load();
    return null;
  },
};
