// Migrations: every MigrationPlan with its phase timeline (one condition per phase, from when it
// began to when it last changed), how its data moved and the writes lost at the switch as measured;
// every CachePlan with the reads that proposed it and what it would place; and the Migration and
// CachePlan decision records (GET /api/v1/decisions). Live: both lists are watched.

import { svgNode } from "../charts.js";
import { decisionsOf, timeline } from "../decisions.js";
import { badge, errorBox, h, keepFocus, num, replace, table, when } from "../dom.js";
import { ObjectSet } from "../live.js";

const GROUP = "/apis/multicluster.io/v1alpha1";
// The phases of a plan in the order it runs them (docs/migration.md), each with its condition.
export const PHASES = ["TargetPrepared", "DataCopied", "CaughtUp", "TrafficSwitched", "SourceRetired"];
const ENDS = ["RolledBack", "Failed"];

const ms = (iso) => (iso ? Date.parse(iso) : NaN);
const seconds = (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? null : Math.max(0, (b - a) / 1000));

// One row per condition the plan has: the phase, its state, when it began and how long it took.
export function phaseSteps(plan) {
  const conds = new Map((((plan.status || {}).conditions) || []).map((c) => [c.type, c]));
  return [...PHASES, ...ENDS].filter((t) => conds.has(t)).map((t) => {
    const c = conds.get(t);
    const start = ms(c.startTime);
    const end = c.status === "True" || c.status === "False" ? ms(c.lastTransitionTime) : Date.now();
    const state = ENDS.includes(t) ? c.reason || c.status : c.status === "True" ? "done"
      : c.status === "False" ? `failed: ${c.reason || "?"}` : "running";
    return { type: t, state, start, seconds: seconds(start, end), message: c.message || "" };
  });
}

function dataMoved(st) {
  const d = st.data || {};
  if (!d.mover) return "—";
  if (d.mover === "None") return d.declaredNone ? "none (the plan says data: None)" : "none (no data step)";
  const parts = [d.mover];
  if (d.transport) parts.push(`over ${d.transport}`);
  if ((d.claims || []).length) parts.push(`${d.claims.length} claim${d.claims.length > 1 ? "s" : ""}`);
  if (d.maxLagSeconds !== undefined && d.maxLagSeconds !== null) parts.push(`max lag ${num(d.maxLagSeconds)} s`);
  return parts.join(", ");
}

// Lost writes only as the plan measured them: a plan that could not measure says so.
export function lostWrites(st) {
  const d = st.data || {};
  if (d.lostWrites !== undefined && d.lostWrites !== null) return `${d.lostWrites} (measured by ${d.lostWritesMeasuredBy || "?"})`;
  if (d.lostWritesMeasuredBy === "none") return "not measured";
  return "—";
}

// A Gantt strip: each phase a bar from its start over its duration, on one time axis.
function gantt(name, steps) {
  const timed = steps.filter((s) => !Number.isNaN(s.start));
  const width = 480;
  const rowH = 18;
  const label = `Phase timeline of ${name}: ${steps.map((s) => `${s.type} ${s.state}`).join(", ") || "not started"}`;
  const svg = svgNode("svg", { viewBox: `0 0 ${width} ${Math.max(1, timed.length) * rowH + 4}`, role: "img",
    class: "chart gantt", "aria-label": label });
  svg.append(svgNode("title", {}, label));
  if (!timed.length) return svg;
  const t0 = Math.min(...timed.map((s) => s.start));
  const t1 = Math.max(...timed.map((s) => s.start + (s.seconds || 0) * 1000), t0 + 1000);
  const x = (t) => 130 + ((t - t0) / (t1 - t0)) * (width - 140);
  timed.forEach((s, i) => {
    const y = i * rowH + 2;
    svg.append(svgNode("text", { x: 0, y: y + 12, class: "axis" }, s.type));
    const x0 = x(s.start);
    const x1 = Math.max(x0 + 2, x(s.start + (s.seconds || 0) * 1000));
    svg.append(svgNode("rect", { x: x0, y, width: x1 - x0, height: rowH - 6,
      class: `bar ${s.state === "done" ? "ok" : s.state === "running" ? "run" : "bad"}` }));
  });
  return svg;
}

// A plan's row, then a full-width row with its phase timeline (a strip and the same as a list).
function planRows(o) {
  const st = o.status || {};
  const spec = o.spec || {};
  const ref = spec.workloadRef || {};
  const steps = phaseSteps(o);
  const phase = st.phase || "Pending";
  const kind = ["Failed", "RolledBack"].includes(phase) ? "bad" : phase === "Succeeded" ? "ok" : "";
  return [h("tr", { dataset: { name: o.metadata.name } },
    h("th", { scope: "row" }, `${o.metadata.namespace || "default"}/${o.metadata.name}`),
    h("td", {}, `${ref.kind || "StatefulSet"}/${ref.name || "?"}`),
    h("td", {}, `${st.sourceCluster || spec.sourceCluster || "?"} → ${st.targetCluster || spec.targetCluster || "(scheduler's choice)"}`),
    h("td", {}, badge(phase, kind), st.message ? h("div", { class: "muted" }, st.message) : null),
    h("td", { dataset: { testid: "data" } }, dataMoved(st),
      (st.estimate || {}).message ? h("div", { class: "muted" }, `estimate: ${st.estimate.message}`) : null),
    h("td", { dataset: { testid: "lost" } }, lostWrites(st)),
    h("td", {}, (st.freeze || {}).downtimeSeconds !== undefined ? `${num(st.freeze.downtimeSeconds, 3)} s` : "—")),
  h("tr", { class: "timeline", dataset: { timeline: o.metadata.name } },
    h("td", { colspan: "7" }, h("div", { class: "phase-timeline" }, gantt(o.metadata.name, steps),
      h("ol", { class: "phases", "aria-label": `Phases of ${o.metadata.name}`, dataset: { testid: "phases" } },
        steps.map((s) => h("li", { dataset: { phase: s.type } }, `${s.type}: ${s.state}`,
          s.seconds === null ? "" : `, ${num(s.seconds)} s from ${when(new Date(s.start).toISOString())}`))))))];
}

function cacheRow(o) {
  const spec = o.spec || {};
  const st = o.status || {};
  const size = st.sizeGiB !== undefined ? `${num(st.sizeGiB)} GiB` : "size unknown";
  return h("tr", { dataset: { name: o.metadata.name } },
    h("th", { scope: "row" }, `${o.metadata.namespace || "default"}/${o.metadata.name}`),
    h("td", {}, spec.dataset || "?"),
    h("td", {}, `${spec.sourceCluster || "?"} → ${spec.cluster || "?"}`),
    h("td", { class: "num" }, num(spec.readGiBPerHour, 2)),
    h("td", { class: "num" }, spec.transferCostPerHour === undefined || spec.transferCostPerHour === null ? "—" : num(spec.transferCostPerHour, 3)),
    h("td", {}, size),
    h("td", {}, badge(st.phase || "Pending", st.phase === "Failed" ? "bad" : st.phase === "Applied" ? "ok" : ""),
      st.message ? h("div", { class: "muted" }, st.message) : null),
    h("td", {}, spec.approved ? "yes" : "no"),
    h("td", {}, when(st.appliedTime || st.proposedTime)));
}

export default {
  id: "migrations",
  title: "Migrations",
  nav: true,
  route: /^migrations$/,
  visible: () => true,
  render(main, { session, say }) {
    const plans = h("div", { dataset: { testid: "migrationplans" } }, h("p", { class: "muted" }, "Loading…"));
    const caches = h("div", { dataset: { testid: "cacheplans" } });
    const decisions = h("div", {}, h("p", { class: "muted" }, "Loading decisions…"));
    replace(main, h("h1", {}, "Migrations"),
      h("section", { "aria-labelledby": "h-mplans" }, h("h2", { id: "h-mplans" }, "MigrationPlans"), plans),
      h("section", { "aria-labelledby": "h-cplans" }, h("h2", { id: "h-cplans" }, "CachePlans"), caches),
      h("section", { "aria-labelledby": "h-mdec" }, h("h2", { id: "h-mdec" }, "Migration and cache decisions"), decisions));
    const controller = new AbortController();
    const planSet = new ObjectSet(session, `${GROUP}/migrationplans`, (err) => { if (err) say(`MigrationPlans: ${err.message}`); });
    const cacheSet = new ObjectSet(session, `${GROUP}/cacheplans`, (err) => { if (err) say(`CachePlans: ${err.message}`); });
    const sorted = (set) => [...set.items.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const drawPlans = () => keepFocus(plans, () => replace(plans, planSet.items.size
      ? table("Each plan's move, phase timeline, data moved and writes lost at the switch",
        ["Name", "Workload", "Move", "Phase", "Data moved", "Lost writes", "Write freeze"],
        sorted(planSet).map(planRows), { class: "data" })
      : h("p", { class: "muted" }, "No MigrationPlans.")));
    const drawCaches = () => keepFocus(caches, () => replace(caches, cacheSet.items.size
      ? table("Each cache plan: the reads that proposed it and what it places",
        ["Name", "Dataset", "Copy (from → to)", "Reads GiB/h", "Transfer cost/h", "Places", "Phase", "Approved", "Since"],
        sorted(cacheSet).map(cacheRow), { class: "data" })
      : h("p", { class: "muted" }, "No CachePlans.")));
    const loadDecisions = async () => {
      try {
        const [m, c] = await Promise.all([decisionsOf(session, { type: "Migration" }), decisionsOf(session, { type: "CachePlan" })]);
        const items = [...m, ...c].sort((a, b) => String(b.time).localeCompare(String(a.time)));
        replace(decisions, items.length ? timeline(items, "Migration and cache plan decisions, newest first")
          : h("p", { class: "muted" }, "No migration or cache plan decision in the last 7 days."));
      } catch (err) { replace(decisions, errorBox(err)); }
    };
    let phases = "";
    const offs = [planSet.subscribe(() => {
      drawPlans();
      const now = sorted(planSet).map((o) => (o.status || {}).phase).join(",");
      if (now !== phases) { phases = now; loadDecisions(); } // a start or an end is a decision
    }), cacheSet.subscribe(() => { drawCaches(); loadDecisions(); })];
    planSet.run(controller.signal);
    cacheSet.run(controller.signal);
    return () => { offs.forEach((off) => off()); controller.abort(); };
  },
};
