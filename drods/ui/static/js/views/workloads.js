// Workloads (their bindings): placement per cluster and status, live.

import { badge, h, keepFocus, replace, table } from "../dom.js";
import { placementOf } from "../live.js";

export function phaseBadge(phase) {
  const p = phase || "Pending";
  return badge(p, p === "Running" || p === "Scheduled" ? "ok" : p === "Unschedulable" || p === "Failed" ? "bad" : "warn");
}

export function placementText(binding) {
  const p = placementOf(binding);
  return p.length ? p.map((x) => `${x.cluster} ×${x.replicas}`).join(", ") : "—";
}

export default {
  id: "workloads",
  title: "Workloads",
  nav: true,
  route: /^workloads$/,
  visible: () => true,
  render(main, { live }) {
    const holder = h("div", {});
    replace(main, h("h1", {}, "Workloads"), holder);
    const draw = () => {
      if (!live.bindings.loaded) { replace(holder, h("p", { class: "muted" }, "Loading…")); return; }
      const items = [...live.bindings.items.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
      if (!items.length) { replace(holder, h("p", { class: "muted" }, "No workloads yet.")); return; }
      keepFocus(holder, () => replace(holder, table("Every workload's binding: where its replicas are placed", ["Workload", "Resource",
        "Replicas", "Placement", "Status", "Message"], items.map((b) => {
        const r = b.spec.resource || {};
        const st = b.status || {};
        return h("tr", { dataset: { binding: b.metadata.name } },
          h("th", { scope: "row" }, h("a", { href: `#/workloads/${encodeURIComponent(b.metadata.name)}` }, b.metadata.name)),
          h("td", {}, `${r.kind || ""} ${r.namespace ? `${r.namespace}/` : ""}${r.name || ""}`),
          h("td", { class: "num" }, String(b.spec.replicas ?? "—")),
          h("td", {}, placementText(b)),
          h("td", {}, phaseBadge(st.phase)),
          h("td", {}, st.message || ""));
      }), { class: "data" })));
    };
    const off = live.bindings.subscribe(draw);
    draw();
    return off;
  },
};
