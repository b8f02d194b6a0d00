// Placement policies: which workloads they select and how they place them (live).

import { objectList } from "./objects.js";

function targets(spec) {
  const parts = (spec.targetClusters || []).map((t) =>
    t.selectorType === "label" ? `labels ${(t.values || []).join(", ")}` : (t.values || []).join(", "));
  return parts.length ? parts.join("; ") : "any cluster";
}

function division(spec) {
  const rs = (spec.placement || {}).replicaScheduling || {};
  const pref = rs.weightPreference || {};
  return [rs.replicaSchedulingType, rs.replicaDivisionPreference, pref.dynamicWeight].filter(Boolean).join(" · ");
}

function selects(spec) {
  const sel = spec.resourceSelector || (spec.resourceSelectors || [])[0] || {};
  return `${sel.kind || "?"} ${sel.namespace ? `${sel.namespace}/` : ""}${sel.name || "(by labels)"}`;
}

export default objectList({
  id: "policies",
  title: "Policies",
  path: "/apis/multicluster.io/v1alpha1/resourceplacementpolicies",
  caption: "Resource placement policies: what each selects and where it places it",
  columns: [["Selects", (o) => selects(o.spec || {})], ["Target clusters", (o) => targets(o.spec || {})],
            ["Division", (o) => division(o.spec || {})]],
  empty: "No placement policies.",
});
