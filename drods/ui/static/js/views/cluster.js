// One cluster: what it is, its health, load history and forecast, its workloads (live), its
// events, the descheduler's decisions about it; cordon / uncordon / drain for operators.

import { confirmAction, drain, drainForecast, setUnschedulable } from "../actions.js";
import { legend, lineChart } from "../charts.js";
import { decisionsOf, timeline } from "../decisions.js";
import { age, badge, errorBox, h, keepFocus, pct, replace, table, when } from "../dom.js";
import { bindingsOn, ready } from "../live.js";
import { freeNode, price } from "./clusters.js";

const HISTORY = [["waterLevel", "water level", "s-wl"], ["cpu.utilisation", "CPU", "s-cpu"],
                 ["memory.utilisation", "memory", "s-mem"]];
const HORIZONS = [5, 10, 15, 30, 45, 60];

async function charts(session, name, holder) {
  const end = Date.now();
  const start = new Date(end - 3600_000).toISOString();
  const series = [];
  for (const [metric, label, cls] of HISTORY) {
    try {
      const body = await session.get("/api/v1/history/metrics", { cluster: name, metric, startTime: start });
      series.push({ label, cls, points: body.points.map((p) => ({ t: Date.parse(p.time), v: p.value })) });
    } catch { /* a metric this cluster does not report */ }
  }
  const forecast = [];
  let current = null;
  for (const minutes of HORIZONS) {
    try {
      const f = await session.get("/api/v1/monitor/forecast", { cluster: name, minutes });
      current = f.currentWaterLevel;
      forecast.push({ t: Date.parse(f.at), v: f.waterLevel });
    } catch { break; }
  }
  if (current !== null) forecast.unshift({ t: Date.now(), v: current });
  const history = { label: "load history (water level, CPU, memory), last hour", cls: "", points: [] };
  const fc = { label: "forecast water level, next hour", cls: "s-fc", dashed: true, points: forecast };
  replace(holder,
    h("figure", {},
      lineChart({ title: `Load history of ${name}: water level, CPU and memory utilisation, last hour`, series }),
      h("figcaption", {}, legend(series.length ? series : [history]))),
    h("figure", {},
      lineChart({ title: `Forecast water level of ${name} for the next hour`, series: [fc] }),
      h("figcaption", {}, legend([fc]),
        h("p", { class: "muted" }, forecast.some((p) => p.v !== null)
          ? `In 30 minutes: ${pct((forecast.find((p, i) => HORIZONS[i - 1] === 30) || {}).v)}`
          : "No forecast yet (not enough history)."))));
}

async function events(session, name, holder) {
  try {
    const [failures, ops] = await Promise.all([
      session.get("/api/v1/history/failures", { cluster: name, maxEntries: 50 }),
      session.get("/api/v1/monitor/operations", { maxEntries: 200 }),
    ]);
    const items = [...failures.items.map((e) => ({ ...e, source: "failure" })),
                   ...ops.items.filter((e) => e.cluster === name).map((e) => ({ ...e, source: "operation" }))]
      .sort((a, b) => (b.time || "").localeCompare(a.time || ""));
    replace(holder, items.length
      ? table(null, ["Time", "Kind", "Reason"], items.map((e) =>
        h("tr", {}, h("td", {}, when(e.time)), h("td", {}, badge(e.kind, e.source === "failure" ? "bad" : "")),
          h("td", {}, e.reason || ""))), { class: "data" })
      : h("p", { class: "muted" }, "No failures or automatic operations recorded for this cluster."));
  } catch (err) {
    replace(holder, errorBox(err));
  }
}

// The descheduler's decisions about the cluster (evictions, rebalancing) with what it saw (X1).
async function decisions(session, name, holder) {
  try {
    const items = await decisionsOf(session, { kind: "Cluster", name });
    replace(holder, items.length ? timeline(items, `Decisions about ${name}, newest first`)
      : h("p", { class: "muted", dataset: { testid: "no-decisions" } }, "No decision about this cluster in the last 7 days."));
  } catch (err) {
    replace(holder, errorBox(err));
  }
}

export default {
  id: "cluster",
  section: "clusters",
  title: "Cluster",
  nav: false,
  route: /^clusters\/([^/]+)$/,
  visible: () => true,
  render(main, { live, session, say }, [name]) {
    const title = h("h1", {}, name);
    const flags = h("p", { class: "flags" });
    const actions = h("div", { class: "actions", role: "group", "aria-label": "Cluster actions" });
    const details = h("div", {});
    const work = h("div", { dataset: { testid: "cluster-workloads" } });
    const chartBox = h("div", { class: "charts" }, h("p", { class: "muted" }, "Loading charts…"));
    const eventBox = h("div", {}, h("p", { class: "muted" }, "Loading events…"));
    const decisionBox = h("div", { dataset: { testid: "cluster-decisions" } }, h("p", { class: "muted" }, "Loading decisions…"));
    replace(main, h("p", { class: "crumbs" }, h("a", { href: "#/clusters" }, "Clusters"), " / ", name),
      title, flags, session.canWrite ? actions : null, details,
      h("section", { "aria-labelledby": "h-load" }, h("h2", { id: "h-load" }, "Load"), chartBox),
      h("section", { "aria-labelledby": "h-work" }, h("h2", { id: "h-work" }, "Workloads here"), work),
      h("section", { "aria-labelledby": "h-events" }, h("h2", { id: "h-events" }, "Events"), eventBox),
      h("section", { "aria-labelledby": "h-cdec" }, h("h2", { id: "h-cdec" }, "Decisions"), decisionBox));
    let busy = false;
    const act = async (label, question, okLabel, fn) => {
      if (busy || !(await confirmAction(label, question, okLabel))) return;
      busy = true;
      try { say(await fn()); } catch (err) { say(`${label} failed: ${err.message}`); } finally { busy = false; }
    };
    const draw = () => {
      const c = live.clusters.items.get(name);
      if (!c) {
        replace(details, h("p", { class: "muted" }, live.clusters.loaded ? `No cluster named ${name}.` : "Loading…"));
        return;
      }
      const spec = c.spec;
      const st = c.status || {};
      const r = live.realtime.cluster(name);
      const isReady = ready(c);
      replace(flags, h("span", { class: "wl big" }, pct(r ? r.waterLevel : (st.resourceSummary || {}).waterLevel)),
        " water level ",
        isReady === "True" ? badge("Ready", "ok") : badge(isReady === "False" ? "Not ready" : "Unknown", "bad"),
        spec.unschedulable ? badge("Cordoned", "warn") : badge("Schedulable", "ok"),
        (spec.taints || []).map((t) => badge(`${t.key}:${t.effect}`, "warn")),
        h("span", { class: "muted" }, ` report ${age(live.realtime.reportAge(name))}`));
      // Rebuild buttons and facts only when the object changed (a live update keeps keyboard focus).
      const key = `${c.metadata.resourceVersion}/${flatStatus ? "f" : ""}`;
      if (key === drawn) return;
      drawn = key;
      if (session.canWrite) {
        keepFocus(actions, () => replace(actions,
          spec.unschedulable
            ? h("button", { type: "button", onclick: () => act("Uncordon", `Let the scheduler place new replicas on ${name} again?`,
              "Uncordon", async () => { await setUnschedulable(session, name, false); return `${name} uncordoned`; }) }, "Uncordon")
            : h("button", { type: "button", onclick: () => act("Cordon", `Stop placing new replicas on ${name}? What runs there stays.`,
              "Cordon", async () => { await setUnschedulable(session, name, true); return `${name} cordoned`; }) }, "Cordon"),
          h("button", { type: "button", class: "danger", onclick: async () => act("Drain",
            `Cordon ${name} and move every workload with replicas there to other clusters (new copies become ready first)? `
              + await drainForecast(session, name).catch((err) => `(Its dry run failed: ${err.message}.)`),
            "Drain", async () => {
              const done = await drain(session, name);
              const moved = done.rescheduled, plans = done.migrationPlans, kept = done.refused || [];
              return `${name} cordoned; ${moved.length} workload(s) asked to move${moved.length ? `: ${moved.join(", ")}` : ""}`
                + (plans.length ? `; ${plans.length} migration plan(s) started: ${plans.join(", ")}` : "")
                + (kept.length ? `; left in place (their data would not move): ${kept.join("; ")}` : "");
            }) }, "Drain")));
      }
      const rs = st.resourceSummary || {};
      const rows = [
        ["Region / zone", [spec.region, spec.zone].filter(Boolean).join(" / ")], ["City", spec.city],
        ["Provider", spec.provider], ["Mode", spec.syncMode], ["Endpoint", spec.endpoint],
        ["Kubernetes", st.kubernetesVersion],
        ["Nodes", st.nodeSummary ? `${st.nodeSummary.readyNum}/${st.nodeSummary.totalNum} ready` : null],
        ["CPU (cores)", rs.cpu ? `${rs.cpu.used ?? 0} used, ${rs.cpu.allocated ?? 0} allocated of ${rs.cpu.allocatable}` : null],
        ["Memory (GiB)", rs.memory ? `${rs.memory.used ?? 0} used, ${rs.memory.allocated ?? 0} allocated of ${rs.memory.allocatable}` : null],
        ["Capabilities", [...(spec.capabilities || []), ...(spec.gpuModels || [])].join(", ")],
        ["Largest free node", freeNode(flatStatus)], ["Price", price(spec.cost)],
        ["Water level limit", spec.waterLevelLimit ? pct(spec.waterLevelLimit) : null],
      ].filter(([, v]) => v);
      replace(details,
        h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
        table("Conditions", ["Type", "Status", "Reason", "Message", "Since"], (st.conditions || []).map((x) =>
          h("tr", {}, h("td", {}, x.type), h("td", {}, x.status), h("td", {}, x.reason || ""), h("td", {}, x.message || ""),
            h("td", {}, when(x.lastTransitionTime)))), { class: "data" }));
    };
    const drawWork = () => {
      const here = bindingsOn(live.bindings.items, name);
      keepFocus(work, () => replace(work, here.length
        ? table(null, ["Workload", "Replicas placed here", "Copy here", "Phase"], here.map(({ binding, placed, copy }) =>
          h("tr", { dataset: { binding: binding.metadata.name } },
            h("th", { scope: "row" }, h("a", { href: `#/workloads/${encodeURIComponent(binding.metadata.name)}` },
              binding.metadata.name)),
            h("td", { class: "num" }, String(placed)),
            h("td", {}, copy ? `${copy.readyReplicas ?? 0}/${copy.replicas ?? 0} ready${placed ? "" : " (leaving)"}` : "—"),
            h("td", {}, (binding.status || {}).phase || "Pending"))), { class: "data" })
        : h("p", { class: "muted", dataset: { testid: "no-workloads" } }, "No workloads on this cluster.")));
    };
    let flatStatus = null;
    let drawn = "";
    session.get(`/api/v1/clusters/${encodeURIComponent(name)}`)
      .then((f) => { flatStatus = f.status && f.status.resources; draw(); }).catch(() => {});
    const offs = [live.clusters.subscribe(draw), live.realtime.subscribe(draw), live.bindings.subscribe(drawWork)];
    draw();
    drawWork();
    charts(session, name, chartBox);
    events(session, name, eventBox);
    decisions(session, name, decisionBox);
    const refresh = setInterval(() => charts(session, name, chartBox), 30_000);
    return () => { offs.forEach((off) => off()); clearInterval(refresh); };
  },
};
