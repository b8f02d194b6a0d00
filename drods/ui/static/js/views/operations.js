// Automatic operations (evacuate, pre-allocate, restore) with their reasons and outcomes, and
// the failure log. Views of later features (routes, migrations, autoscalers) sit beside this one.

import { badge, errorBox, h, replace, table, when } from "../dom.js";

function entries(items, withOutcome) {
  return table(null, ["Time", "Kind", "Cluster", "Workload", "Reason", ...(withOutcome ? ["Outcome"] : [])],
    items.map((e) => h("tr", {},
      h("td", {}, when(e.time)), h("td", {}, badge(e.kind || "?")), h("td", {}, e.cluster || "—"),
      h("td", {}, e.binding || "—"), h("td", {}, e.reason || ""),
      withOutcome ? h("td", {}, (e.details || {}).outcome || "—") : null)), { class: "data" });
}

export default {
  id: "operations",
  title: "Operations",
  nav: true,
  route: /^operations$/,
  visible: () => true,
  render(main, { session }) {
    const ops = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const fails = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    replace(main, h("h1", {}, "Operations"),
      h("section", { "aria-labelledby": "h-ops" }, h("h2", { id: "h-ops" }, "Automatic operations"), ops),
      h("section", { "aria-labelledby": "h-fails" }, h("h2", { id: "h-fails" }, "Failures"), fails));
    const load = async () => {
      try {
        const body = await session.get("/api/v1/monitor/operations", { maxEntries: 200 });
        replace(ops, body.items.length ? entries(body.items, true)
          : h("p", { class: "muted" }, "No automatic operations recorded."));
      } catch (err) { replace(ops, errorBox(err)); }
      try {
        const body = await session.get("/api/v1/history/failures", { maxEntries: 200 });
        replace(fails, body.items.length ? entries(body.items, false) : h("p", { class: "muted" }, "No failures recorded."));
      } catch (err) { replace(fails, errorBox(err)); }
    };
    load();
    const refresh = setInterval(load, 30_000);
    return () => clearInterval(refresh);
  },
};
