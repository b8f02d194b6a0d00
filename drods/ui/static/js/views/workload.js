// One workload: where its replicas are, their status, and why — the scheduler's explanation from
// schedule history, refreshed whenever the binding is decided again. Operators can ask for a reschedule.

import { confirmAction, reschedule } from "../actions.js";
import { badge, errorBox, h, keepFocus, replace, table, when } from "../dom.js";
import { decisionsOf, timeline } from "../decisions.js";
import { explanation, whyNot } from "../explain.js";
import { phaseBadge } from "./workloads.js";

// When no feasible cluster went without: say so only when some cluster received replicas; an
// unschedulable decision had no feasible cluster (or placed nothing) and says that instead.
function notElsewhere(entry) {
  const placed = ((entry.result || {}).placement || []).filter((p) => p.replicas > 0);
  const feasible = (entry.candidates || {}).feasible;
  if (feasible === 0) return "No cluster was feasible, so none received replicas (see the filtered-out clusters above).";
  if (!placed.length) return "No replica was placed: no feasible cluster could take one.";
  return "Every feasible cluster weighed received replicas.";
}

export default {
  id: "workload",
  section: "workloads",
  title: "Workload",
  nav: false,
  route: /^workloads\/([^/]+)$/,
  visible: () => true,
  render(main, { live, session, say }, [name]) {
    const head = h("div", {});
    const where = h("div", { dataset: { testid: "placement" } });
    const why = h("div", {}, h("p", { class: "muted" }, "Loading the decision…"));
    const earlier = h("div", {});
    const failures = h("div", {});
    const notThere = h("div", { dataset: { testid: "why-not" } });
    const history = h("div", {}, h("p", { class: "muted" }, "Loading the timeline…"));
    const actions = session.canWrite
      ? h("div", { class: "actions", role: "group", "aria-label": "Workload actions" },
        h("button", { type: "button", onclick: async () => {
          if (!(await confirmAction("Reschedule", `Ask the scheduler to place ${name} again from scratch?`, "Reschedule"))) return;
          try { await reschedule(session, name, "dashboard"); say(`${name}: reschedule requested`); } catch (err) {
            say(`Reschedule failed: ${err.message}`);
          }
        } }, "Reschedule"))
      : null;
    replace(main, h("p", { class: "crumbs" }, h("a", { href: "#/workloads" }, "Workloads"), " / ", name),
      h("h1", {}, name), head, actions,
      h("section", { "aria-labelledby": "h-where" }, h("h2", { id: "h-where" }, "Placement"), where),
      h("section", { "aria-labelledby": "h-why" }, h("h2", { id: "h-why" }, "Why it is where it is"), why, earlier),
      h("section", { "aria-labelledby": "h-not" }, h("h2", { id: "h-not" }, "Why not elsewhere"), notThere),
      h("section", { "aria-labelledby": "h-timeline" }, h("h2", { id: "h-timeline" }, "Decision timeline"), history),
      h("section", { "aria-labelledby": "h-fail" }, h("h2", { id: "h-fail" }, "Scheduling failures"), failures));

    let decided = null;
    const loadTimeline = async () => {
      const b = live.bindings.items.get(name);
      const r = (b && b.spec.resource) || {};
      try {
        const items = await decisionsOf(session, r.name ? { kind: r.kind, namespace: r.namespace || "default", name: r.name }
          : { kind: "Binding", namespace: "default", name });
        replace(history, items.length ? timeline(items) : h("p", { class: "muted" }, "No decision kept."));
      } catch (err) {
        replace(history, errorBox(err));
      }
    };
    const loadHistory = async () => {
      try {
        const body = await session.get("/api/v1/history/schedules", { binding: name, maxEntries: 20 });
        if (!body.items.length) {
          replace(why, h("p", { class: "muted" }, "No decision in the schedule history (it keeps the last hour)."));
          replace(earlier);
          return;
        }
        replace(why, explanation(body.items[0]));
        const reasons = whyNot(body.items[0]);
        replace(notThere, reasons.size
          ? table("Feasible clusters that received nothing", ["Cluster", "Why not"], [...reasons].map(([c, text]) =>
            h("tr", { dataset: { cluster: c } }, h("th", { scope: "row" }, c), h("td", {}, text))), { class: "data" })
          : h("p", { class: "muted" }, notElsewhere(body.items[0])));
        loadTimeline();
        replace(earlier, body.items.length > 1
          ? h("details", {}, h("summary", {}, `${body.items.length - 1} earlier decision(s)`),
            body.items.slice(1).map((e) => h("section", { class: "earlier" }, h("h3", {}, when(e.time)), explanation(e))))
          : null);
        // Unschedulable and partially scheduled verdicts, as the scheduler logs them (once per verdict).
        const fails = await session.get("/api/v1/history/failures", { maxEntries: 1000 });
        const mine = fails.items.filter((e) => e.binding === name);
        replace(failures, mine.length
          ? table(null, ["Time", "Kind", "Reason"], mine.map((e) => h("tr", {}, h("td", {}, when(e.time)),
            h("td", {}, badge(e.kind, "bad")), h("td", {}, e.reason))), { class: "data", dataset: { testid: "failures" } })
          : h("p", { class: "muted" }, "None recorded."));
      } catch (err) {
        replace(why, errorBox(err));
      }
    };
    const draw = () => {
      const b = live.bindings.items.get(name);
      if (!b) {
        replace(head, h("p", { class: "muted" }, live.bindings.loaded ? `No workload named ${name}.` : "Loading…"));
        return;
      }
      const st = b.status || {};
      const r = b.spec.resource || {};
      replace(head, h("p", {}, phaseBadge(st.phase), ` ${r.kind || ""} ${r.namespace ? `${r.namespace}/` : ""}${r.name || ""}, `
        + `${b.spec.replicas ?? "?"} replicas requested. ${st.message || ""}`));
      const copies = new Map((st.clusters || []).map((c) => [c.cluster, c]));
      const names = [...new Set([...(st.placement || []).map((p) => p.cluster), ...copies.keys()])].sort();
      keepFocus(where, () => replace(where, names.length
        ? table(null, ["Cluster", "Placed replicas", "Applied", "Ready", "Condition"], names.map((c) => {
          const placed = ((st.placement || []).find((p) => p.cluster === c) || {}).replicas || 0;
          const copy = copies.get(c) || {};
          const cond = (copy.conditions || []).find((x) => x.status !== "True") || (copy.conditions || [])[0];
          return h("tr", { dataset: { cluster: c } },
            h("th", { scope: "row" }, h("a", { href: `#/clusters/${encodeURIComponent(c)}` }, c)),
            h("td", { class: "num" }, String(placed)),
            h("td", {}, copy.applied ? "yes" : copy.cluster ? "no" : "—"),
            h("td", { class: "num" }, copy.cluster ? `${copy.readyReplicas ?? 0}/${copy.replicas ?? 0}` : "—"),
            h("td", {}, cond ? `${cond.type}: ${cond.message || cond.reason || cond.status}` : ""));
        }), { class: "data" })
        : h("p", { class: "muted" }, "Not placed anywhere.")));
      const key = `${st.scheduledGeneration}/${st.scheduledTime}/${st.phase}`;
      if (key !== decided) { decided = key; loadHistory(); }
    };
    const off = live.bindings.subscribe(draw);
    draw();
    if (live.bindings.loaded && !live.bindings.items.has(name)) loadHistory();
    return off;
  },
};
