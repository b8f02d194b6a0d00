// Autoscaling: every FederatedHPA and CronFederatedHPA, live — current / desired / min / max, each
// metric against its target, the rule in effect — and the scaling decision timeline as a chart
// (GET /api/v1/decisions?type=Scaling) with the table of decisions under it.

import { legend, lineChart } from "../charts.js";
import { decisionsOf, timeline } from "../decisions.js";
import { errorBox, h, keepFocus, replace, table } from "../dom.js";
import { ObjectSet } from "../live.js";

const GROUP = "/apis/multicluster.io/v1alpha1";

function metrics(o) {
  const current = new Map(((o.status || {}).currentMetrics || []).map((m) => [(m.resource || {}).name, (m.resource || {}).current || {}]));
  return ((o.spec || {}).metrics || []).map((m) => {
    const r = m.resource || {};
    const target = (r.target || {}).averageUtilization;
    const now = (current.get(r.name) || {}).averageUtilization;
    return `${r.name} ${now ?? "—"}% of ${target ?? "—"}%`;
  }).join("; ") || ((o.spec || {}).feedback ? "application feedback" : "—");
}

function ref(o) {
  const t = (o.spec || {}).scaleTargetRef || {};
  return `${t.kind || "?"} ${o.metadata.namespace || "default"}/${t.name || "?"}`;
}

const hpaRow = (o) => {
  const st = o.status || {};
  return h("tr", { dataset: { name: o.metadata.name } }, h("th", { scope: "row" }, `${o.metadata.namespace || "default"}/${o.metadata.name}`),
    h("td", {}, ref(o)), h("td", { class: "num" }, String(st.currentReplicas ?? "—")),
    h("td", { class: "num" }, String(st.desiredReplicas ?? "—")),
    h("td", { class: "num" }, bound(st.minReplicas, o.spec.minReplicas ?? 1)),
    h("td", { class: "num" }, bound(st.maxReplicas, o.spec.maxReplicas)),
    h("td", {}, metrics(o)));
};

// The bound in effect (a cron rule's, from the status), with the spec's beside it when they differ.
const bound = (effective, spec) =>
  effective === undefined || effective === spec ? String(spec ?? "—") : `${effective} (spec ${spec ?? "—"})`;

function ruleText(r) {
  const parts = [];
  if (r.targetReplicas !== undefined) parts.push(String(r.targetReplicas));
  if (r.targetMinReplicas !== undefined) parts.push(`min ${r.targetMinReplicas}`);
  if (r.targetMaxReplicas !== undefined) parts.push(`max ${r.targetMaxReplicas}`);
  return `${r.name}: ${r.schedule} → ${parts.join(", ") || "?"}${r.suspend ? " (suspended)" : ""}`;
}

const cronRow = (o) => {
  const st = o.status || {};
  const rules = ((o.spec || {}).rules || []).map(ruleText);
  return h("tr", { dataset: { name: o.metadata.name } }, h("th", { scope: "row" }, `${o.metadata.namespace || "default"}/${o.metadata.name}`),
    h("td", {}, ref(o)), h("td", {}, rules.join("; ") || "—"),
    h("td", {}, st.activeRule || (st.executionHistories || []).map((x) => x.ruleName).join(", ") || "—"));
};

function chart(records) {
  const byWorkload = new Map();
  for (const r of records.slice().reverse()) {
    const key = `${r.subject.kind}/${r.subject.namespace}/${r.subject.name}`;
    if (!byWorkload.has(key)) byWorkload.set(key, []);
    // the count before (the line steps up or down from it) and after each decision (a dot)
    const t = Date.parse(r.time);
    const from = r.outcome.from;
    if (typeof from === "number" && from !== r.outcome.to) byWorkload.get(key).push({ t, v: from, mark: true });
    byWorkload.get(key).push({ t, v: r.outcome.to, mark: true });
  }
  const series = [...byWorkload].slice(0, 6).map(([label, points], i) => ({ label, points, cls: `s${i}` }));
  const top = Math.max(1, ...records.map((r) => Math.max(r.outcome.to || 0, r.outcome.from || 0)));
  return h("figure", {}, lineChart({ title: "Desired replicas per scaling decision (before → after)", series, yMax: top,
    yFormat: (v) => String(v), integer: true }), h("figcaption", {}, legend(series)));
}

export default {
  id: "autoscaling",
  title: "Autoscaling",
  nav: true,
  route: /^autoscaling$/,
  visible: () => true,
  render(main, { session, say }) {
    const hpas = h("div", { dataset: { testid: "hpas" } }, h("p", { class: "muted" }, "Loading…"));
    const crons = h("div", { dataset: { testid: "crons" } });
    const decisions = h("div", {}, h("p", { class: "muted" }, "Loading decisions…"));
    replace(main, h("h1", {}, "Autoscaling"),
      h("section", { "aria-labelledby": "h-hpa" }, h("h2", { id: "h-hpa" }, "FederatedHPAs"), hpas),
      h("section", { "aria-labelledby": "h-cron" }, h("h2", { id: "h-cron" }, "CronFederatedHPAs"), crons),
      h("section", { "aria-labelledby": "h-scale" }, h("h2", { id: "h-scale" }, "Scaling decisions"), decisions));
    const controller = new AbortController();
    const hpaSet = new ObjectSet(session, `${GROUP}/federatedhpas`, (err) => { if (err) say(`FederatedHPAs: ${err.message}`); });
    const cronSet = new ObjectSet(session, `${GROUP}/cronfederatedhpas`, (err) => { if (err) say(`CronFederatedHPAs: ${err.message}`); });
    const sorted = (set) => [...set.items.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const drawHpas = () => keepFocus(hpas, () => replace(hpas, hpaSet.items.size
      ? table("Each autoscaler's replicas and its metrics against their targets",
        ["Name", "Scales", "Current", "Desired", "Min", "Max", "Metrics (current of target)"], sorted(hpaSet).map(hpaRow), { class: "data" })
      : h("p", { class: "muted" }, "No FederatedHPAs.")));
    const drawCrons = () => keepFocus(crons, () => replace(crons, cronSet.items.size
      ? table(null, ["Name", "Scales", "Rules", "Last rule run"], sorted(cronSet).map(cronRow), { class: "data" })
      : h("p", { class: "muted" }, "No CronFederatedHPAs.")));
    const loadDecisions = async () => {
      try {
        const items = await decisionsOf(session, { type: "Scaling" });
        replace(decisions, items.length ? [chart(items), timeline(items, "Scaling decisions, newest first")]
          : h("p", { class: "muted" }, "No scaling decision in the last 7 days."));
      } catch (err) { replace(decisions, errorBox(err)); }
    };
    let desired = "";
    const offs = [hpaSet.subscribe(() => {
      drawHpas();
      const now = sorted(hpaSet).map((o) => (o.status || {}).desiredReplicas).join(",");
      if (now !== desired) { desired = now; loadDecisions(); } // a new count is a new decision
    }), cronSet.subscribe(drawCrons)];
    hpaSet.run(controller.signal);
    cronSet.run(controller.signal);
    loadDecisions();
    return () => { offs.forEach((off) => off()); controller.abort(); };
  },
};
