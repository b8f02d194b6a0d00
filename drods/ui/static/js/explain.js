// A scheduling decision (one schedule-history entry) as a readable explanation: what was
// asked, which clusters were candidates, why some were filtered out, how each plugin scored the
// rest with which weights, and what the adjuster did.

import { badge, h, num, pct, table, when } from "./dom.js";

// The adjuster's mode in words that match the figures shown beside it: the profile's adjuster maps
// the fleet water level (and a traffic surge) to a spread factor; the sentence says what that did.
export function adjusterSentence(adj) {
  const level = pct(adj.fleetWaterLevel);
  const surge = adj.surge > 0 ? ` and a traffic surge (${num(adj.surge, 2)})` : "";
  if (adj.mode === "spread") {
    return `spread — at a fleet water level of ${level}${surge}, this profile spreads: replicas go where the water level is lowest`;
  }
  if (adj.mode === "pack") {
    return `pack — at a fleet water level of ${level}${surge}, this profile packs: replicas fill few clusters`;
  }
  if (adj.mode === "blend") {
    return `blend — at a fleet water level of ${level}${surge}, this profile weighs spreading and packing (spread ${num(adj.spread, 2)})`;
  }
  return adj.mode;
}

export function explanation(entry) {
  const res = entry.result || {};
  const placement = (res.placement || []).filter((p) => p.replicas > 0);
  const scores = entry.scores || {};
  const totals = scores.total || {};
  const plugins = Object.keys(scores).filter((k) => k !== "total");
  const weights = entry.weights || {};
  const base = entry.baseWeights || {};
  const cand = entry.candidates || {};
  const filters = entry.filters || {};
  const reasons = filters.reasons || {};
  const adj = entry.adjuster || {};
  const scored = Object.keys(totals).sort((a, b) => (totals[b] ?? 0) - (totals[a] ?? 0));
  const placedOn = new Map(placement.map((p) => [p.cluster, p.replicas]));

  // X1: the options the decision weighed (chosen + the best unchosen feasible clusters), with "why not".
  const options = entry.options || [];
  const why = whyNot(entry);
  const verdictRows = [
    ...(options.length ? options.map((o) => o.cluster) : scored).map((c) => h("tr", { dataset: { cluster: c } },
      h("th", { scope: "row" }, c), h("td", {}, badge("passed", "ok")),
      h("td", {}, placedOn.has(c) ? `received ${placedOn.get(c)} replica(s)` : `feasible, received none — ${why.get(c) || "not chosen"}`))),
    ...Object.entries(reasons).sort(([a], [b]) => a.localeCompare(b)).map(([c, why]) =>
      h("tr", { dataset: { cluster: c } }, h("th", { scope: "row" }, c), h("td", {}, badge("filtered out", "bad")), h("td", {}, why))),
  ];
  const counts = Object.entries(filters.reasonCounts || {});

  return h("article", { class: "explain", dataset: { testid: "explanation" } },
    h("p", { class: "lead" },
      `${res.phase || "?"}: ${res.placed ?? 0} of ${res.requested ?? "?"} replicas placed`,
      placement.length ? ` — ${placement.map((p) => `${p.cluster} ×${p.replicas}`).join(", ")}` : "",
      res.partial ? " (partial)" : ""),
    res.message ? h("p", {}, res.message) : null,
    h("dl", { class: "facts" },
      h("dt", {}, "Decided"), h("dd", {}, `${when(entry.time)} by ${entry.scheduler || "?"} (profile ${entry.profile || "?"})`),
      h("dt", {}, "Why scheduled"), h("dd", {}, entry.scheduleType || "?",
        entry.trigger ? ` — ${entry.trigger.reason || JSON.stringify(entry.trigger)}` : ""),
      h("dt", {}, "Candidates"), h("dd", { dataset: { testid: "candidates" } },
        `${cand.total ?? "?"} candidate clusters, ${cand.feasible ?? "?"} feasible`),
      h("dt", {}, "Division"), h("dd", {}, entry.division || "—"),
      ...usersFacts((entry.analysis || {}).users),
      h("dt", {}, "Adjuster mode"), h("dd", { dataset: { testid: "adjuster" } },
        adj.mode ? adjusterSentence(adj)
          : cand.feasible === 0 ? "no scoring (no feasible cluster)"
            : "no scoring (a single feasible cluster or a fixed placement)",
        adj.mode ? ` (spread ${num(adj.spread, 2)}, fleet water level ${pct(adj.fleetWaterLevel)}, surge ${num(adj.surge, 2)})` : "")),
    why.runnerUp ? h("p", { dataset: { testid: "runner-up" } }, h("strong", {}, "Runner-up: "), why.runnerUp) : null,
    h("h3", {}, "Filter verdicts"),
    counts.length ? h("p", {}, "Filtered out: ", counts.map(([why, n], i) => [i ? "; " : "", `${n} × ${why}`])) : null,
    table(null, ["Cluster", "Verdict", "Reason"], verdictRows, { class: "data", dataset: { testid: "verdicts" } }),
    filters.reasonsOmitted ? h("p", { class: "muted" }, `${filters.reasonsOmitted} more filtered clusters not listed.`) : null,
    h("h3", {}, "Scores per plugin"),
    plugins.length
      ? table("Score 0–100 per plugin; the weight this decision used (and the profile's, when the adjuster changed it)",
        ["Cluster", ...plugins.map((p) => {
          const w = weights[p];
          const b = base[p];
          return `${p} ×${num(w, 2)}${b !== undefined && w !== undefined && Math.abs(b - w) > 1e-9 ? ` (profile ×${num(b, 2)})` : ""}`;
        }), "Total"],
        (options.length ? options : scored.map((c) => ({ cluster: c, total: totals[c],
          scores: Object.fromEntries(plugins.map((p) => [p, (scores[p] || {})[c]])) }))).map((o) =>
          h("tr", { dataset: { cluster: o.cluster } }, h("th", { scope: "row" }, o.cluster),
            plugins.map((p) => h("td", { class: "num" }, num((o.scores || {})[p], 1))),
            h("td", { class: "num" }, h("strong", {}, num(o.total, 1))))),
        { class: "data", dataset: { testid: "scores" } })
      : h("p", { class: "muted" }, "No scores recorded (nothing to choose between)."),
    entry.optionsOmitted ? h("p", { class: "muted" }, `${entry.optionsOmitted} more feasible clusters received nothing and scored lower (the best ${options.length - placedOn.size} are shown).`) : null,
    entry.timingsMs && entry.timingsMs.total !== undefined
      ? h("p", { class: "muted" }, `Decided in ${num(entry.timingsMs.total, 2)} ms.`) : null);
}

// Where the workload's users are (declared, learned), its latency SLO and the latency from them to each
// chosen cluster: what `drods explain` says on its inputs line.
function usersFacts(users) {
  if (!users || !(users.sites || []).length) return [];
  const place = (site) => Object.entries(site).find(([k]) => k !== "weight")?.[1] ?? "?";
  const sites = users.sites.map((s) => `${place(s)} ${Math.round((s.weight || 0) * 100)}%`).join(", ");
  const latency = Object.entries(users.latencyMs || {}).map(([c, ms]) =>
    typeof ms === "number" ? `${c} ${Math.round(ms)} ms${users.latencyFrom && users.latencyFrom[c] && users.sites.length > 1 ? ` from ${users.latencyFrom[c]}` : ""}` : `${c} unknown`);
  const unknown = (users.unknownPlaces || []).map(place);
  return [
    h("dt", {}, "Users"), h("dd", { dataset: { testid: "users" } },
      `${users.source || "unknown"}: ${sites}`, users.latencySLOMs !== undefined && users.latencySLOMs !== null ? `; SLO ${users.latencySLOMs} ms` : "",
      latency.length ? `; latency ${latency.join(", ")}` : "",
      unknown.length ? `; no latency known from ${unknown.join(", ")} (weighed as neutral)` : "",
      users.latencySLO ? ` — ${users.latencySLO}` : ""),
  ];
}

// Why each feasible cluster that received nothing lost, and the runner-up: the sentences the API gives
// beside the entry (`whyNot`, `runnerUp`: drods.model.decision, what `drods explain` says), so the page
// cannot tell a story of its own.
export function whyNot(entry) {
  const out = new Map(Object.entries(entry.whyNot || {}));  // the options' order: best first
  if (entry.runnerUp) out.runnerUp = entry.runnerUp.why;
  return out;
}
