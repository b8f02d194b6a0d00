// Placement policies — DRO-DS's ResourcePlacementPolicies and PropagationPolicies, Karmada's
// PropagationPolicies and ClusterPropagationPolicies as written — which workloads each selects and how it
// places them (live).

import { objectList } from "./objects.js";

function labels(selector) {
  const match = (selector || {}).matchLabels || {};
  const text = Object.entries(match).map(([k, v]) => `${k}=${v}`).join(", ");
  return text ? `labels ${text}` : "";
}

function targets(spec) {
  const given = spec.targetClusters || [];
  // a ResourcePlacementPolicy's {selectorType, values}, or a PropagationPolicy's shorthand list of names
  const parts = given.map((t) => (typeof t === "string" ? t
    : t.selectorType === "label" ? `labels ${(t.values || []).join(", ")}` : (t.values || []).join(", ")));
  const placement = spec.placement || {};
  // Karmada's clusterAffinity (names, labels) and clusterAffinities (tried in order)
  const affinities = placement.clusterAffinity ? [placement.clusterAffinity]
    : (placement.clusterAffinities || []);
  affinities.forEach((a) => {
    const said = [(a.clusterNames || []).join(", "), labels(a.labelSelector)].filter(Boolean).join("; ");
    if (said) parts.push(a.affinityName ? `${a.affinityName}: ${said}` : said);
  });
  return parts.length ? parts.join("; ") : "any cluster";
}

// What divides the replicas: Karmada's replicaScheduling, DRO-DS's cost-first fill and users' shares; with none
// of them, the water level (docs/karmada.md D3) — it read blank.
function division(spec) {
  const pl = spec.placement || {};
  const rs = pl.replicaScheduling || {};
  const pref = rs.weightPreference || {};
  const parts = [rs.replicaSchedulingType, rs.replicaDivisionPreference, pref.dynamicWeight,
    pref.staticWeightList ? "static weights" : null, pl.costFirst ? "cost-first" : null,
    (pl.users || []).length ? `by users' shares${pl.latencySLOMs ? ` (SLO ${pl.latencySLOMs} ms)` : ""}` : null];
  return parts.filter(Boolean).join(" · ") || "WaterLevel (default)";
}

function selects(spec) {
  if (spec.resourceType && !(spec.resourceSelectors || []).length) return `every ${spec.resourceType}`;
  const all = spec.resourceSelector ? [spec.resourceSelector] : (spec.resourceSelectors || []);
  const sel = all[0] || {};
  const what = sel.name || labels(sel.labelSelector) || "(all)";
  const more = all.length > 1 ? ` and ${all.length - 1} more` : "";
  return `${sel.kind || "?"} ${sel.namespace ? `${sel.namespace}/` : ""}${what}${more}`;
}

export default objectList({
  id: "policies",
  title: "Policies",
  sources: [
    { path: "/apis/multicluster.io/v1alpha1/resourceplacementpolicies", kind: "ResourcePlacementPolicy" },
    { path: "/apis/multicluster.io/v1alpha1/propagationpolicies", kind: "PropagationPolicy" },
    { path: "/apis/policy.karmada.io/v1alpha1/propagationpolicies", kind: "PropagationPolicy (Karmada)" },
    { path: "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies", kind: "ClusterPropagationPolicy (Karmada)" },
  ],
  caption: "Placement policies, DRO-DS's and Karmada's: what each selects and where it places it",
  columns: [["Selects", (o) => selects(o.spec || {})], ["Target clusters", (o) => targets(o.spec || {})],
            ["Division", (o) => division(o.spec || {})]],
  empty: "No placement policies.",
});
