// A scheduling decision (one schedule-history entry) as a readable explanation: what was
// asked, which clusters were candidates, why some were filtered out, how each plugin scored the
// rest with which weights, and what the adjuster did.

import { badge, h, num, pct, table, when } from "./dom.js";

const MODES = {
  spread: "spread — the fleet is busy or uneven, so replicas go where the water level is lowest",
  pack: "pack — the fleet is quiet, so replicas are packed onto few clusters",
  blend: "blend — between spreading and packing",
};

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

  const verdictRows = [
    ...scored.map((c) => h("tr", {}, h("th", { scope: "row" }, c), h("td", {}, badge("passed", "ok")),
      h("td", {}, placedOn.has(c) ? `received ${placedOn.get(c)} replica(s)` : "feasible, received none"))),
    ...Object.entries(reasons).sort(([a], [b]) => a.localeCompare(b)).map(([c, why]) =>
      h("tr", {}, h("th", { scope: "row" }, c), h("td", {}, badge("filtered out", "bad")), h("td", {}, why))),
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
      h("dt", {}, "Adjuster mode"), h("dd", { dataset: { testid: "adjuster" } },
        adj.mode ? MODES[adj.mode] || adj.mode
          : cand.feasible === 0 ? "no scoring (no feasible cluster)"
            : "no scoring (a single feasible cluster or a fixed placement)",
        adj.mode ? ` (spread ${num(adj.spread, 2)}, fleet water level ${pct(adj.fleetWaterLevel)}, surge ${num(adj.surge, 2)})` : "")),
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
        scored.map((c) => h("tr", {}, h("th", { scope: "row" }, c),
          plugins.map((p) => h("td", { class: "num" }, num((scores[p] || {})[c], 1))),
          h("td", { class: "num" }, h("strong", {}, num(totals[c], 1))))),
        { class: "data", dataset: { testid: "scores" } })
      : h("p", { class: "muted" }, "No scores recorded (nothing to choose between)."),
    entry.timingsMs && entry.timingsMs.total !== undefined
      ? h("p", { class: "muted" }, `Decided in ${num(entry.timingsMs.total, 2)} ms.`) : null);
}
