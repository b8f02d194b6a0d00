// Decision records (GET /api/v1/decisions, X1): a timeline of every decision about one subject —
// placements, reschedules, evictions, rebalancing, scaling, route changes, migrations, cache plans.

import { badge, h, table, when } from "./dom.js";

export async function decisionsOf(session, { kind, namespace, name, type, since = "7d", limit = 200 } = {}) {
  const params = { since, limit };
  if (kind) params.kind = kind;
  if (namespace) params.namespace = namespace;
  if (name) params.name = name;
  if (type) params.type = type;
  return (await session.get("/api/v1/decisions", params)).items;
}

const trigger = (r) => (r.trigger && (r.trigger.reason || r.trigger.kind)) || "—";

// Newest first: time, type, trigger, what was decided, and the runner-up when there was one.
export function timeline(records, caption = "Decisions, newest first") {
  return table(caption, ["Time", "Type", "Trigger", "Decision", "Runner-up"],
    records.map((r) => h("tr", { dataset: { type: r.type } },
      h("td", {}, when(r.time)), h("td", {}, badge(r.type, r.type === "Eviction" ? "bad" : "")),
      h("td", {}, trigger(r)), h("td", {}, r.summary || "—"),
      h("td", {}, r.runnerUp ? r.runnerUp.why : "—"))),
    { class: "data", dataset: { testid: "timeline" } });
}
