// Clusters as a table: capacity, use, largest free node, price, conditions, water level (live).

import { badge, h, keepFocus, num, pct, replace, table } from "../dom.js";
import { ready } from "../live.js";

function use(res) {
  if (!res || !res.allocatable) return "—";
  const used = res.used ?? res.allocated ?? 0;
  return `${num(used)} / ${num(res.allocatable)}`;
}

export function price(cost) {
  if (!cost) return "—";
  const parts = [];
  if (cost.cpuCoreHour) parts.push(`${num(cost.cpuCoreHour, 4)}/core·h`);
  if (cost.memoryGiBHour) parts.push(`${num(cost.memoryGiBHour, 4)}/GiB·h`);
  if (cost.gpuHour) parts.push(`${num(cost.gpuHour, 3)}/GPU·h`);
  if (cost.egressGiB) parts.push(`${num(cost.egressGiB, 4)}/GiB out`);
  return parts.join(", ") || "—";
}

export function freeNode(resources) {
  const f = resources && resources.largestNodeFree;
  if (!f) return "—";
  return `${num(f.cpu)} cores, ${num(f.memory)} GiB${f.gpu ? `, ${num(f.gpu, 0)} GPU` : ""}`;
}

export default {
  id: "clusters",
  title: "Clusters",
  nav: true,
  route: /^clusters$/,
  visible: () => true,
  render(main, { live, session }) {
    const holder = h("div", {});
    replace(main, h("h1", {}, "Clusters"), holder);
    let flat = new Map(); // live status documents (largest free node) from the flat view
    const loadFlat = async () => {
      try {
        const body = await session.get("/api/v1/clusters");
        flat = new Map(body.items.map((c) => [c.name, c.status && c.status.resources]));
        draw();
      } catch { /* the table still shows the rest */ }
    };
    const draw = () => {
      const rows = [...live.clusters.items.values()]
        .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
        .map((c) => {
          const name = c.metadata.name;
          const rs = (c.status || {}).resourceSummary || {};
          const r = live.realtime.cluster(name);
          const isReady = ready(c);
          const taints = c.spec.taints || [];
          return h("tr", { dataset: { cluster: name } },
            h("th", { scope: "row" }, h("a", { href: `#/clusters/${encodeURIComponent(name)}` }, name)),
            h("td", {}, [c.spec.region, c.spec.city].filter(Boolean).join(" / ") || "—"),
            h("td", {}, c.spec.provider || "—"),
            h("td", {}, c.spec.syncMode || "Push"),
            h("td", {}, isReady === "True" ? badge("Ready", "ok") : badge(isReady, "bad"),
              c.spec.unschedulable ? badge("Cordoned", "warn") : null,
              taints.map((t) => badge(`${t.key}${t.value ? `=${t.value}` : ""}:${t.effect}`, "warn"))),
            h("td", { class: "num" }, use(rs.cpu)),
            h("td", { class: "num" }, use(rs.memory)),
            h("td", { class: "num" }, rs.gpu && rs.gpu.allocatable ? use(rs.gpu) : "—"),
            h("td", { class: "num" }, rs.pods ? `${num(rs.pods.used, 0)} / ${num(rs.pods.capacity, 0)}` : "—"),
            h("td", {}, freeNode(flat.get(name))),
            h("td", {}, price(c.spec.cost)),
            h("td", { class: "num wl" }, pct(r ? r.waterLevel : rs.waterLevel)));
        });
      keepFocus(holder, () => replace(holder, table("Every cluster; CPU in cores and memory in GiB as used / allocatable",
        ["Cluster", "Region / city", "Provider", "Mode", "Conditions", "CPU", "Memory", "GPU", "Pods",
         "Largest free node", "Price", "Water level"], rows, { class: "data" })));
    };
    const offs = [live.clusters.subscribe(draw), live.realtime.subscribe(draw)];
    draw();
    loadFlat();
    return () => offs.forEach((off) => off());
  },
};
