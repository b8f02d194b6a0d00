// The fleet at a glance: every cluster by region and city with its water level, live.

import { age, badge, h, level, pct, replace } from "../dom.js";
import { ready } from "../live.js";

// Code-point order: names are DNS labels, and a thousand localeCompare calls cost more than the rest.
const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

function groups(clusters) {
  const byRegion = new Map();
  for (const c of clusters.values()) {
    const region = c.spec.region || "no region";
    if (!byRegion.has(region)) byRegion.set(region, []);
    byRegion.get(region).push(c);
  }
  return [...byRegion.entries()].sort(([a], [b]) => cmp(a, b))
    .map(([region, list]) => [region, list.sort((a, b) =>
      cmp(a.spec.city || "", b.spec.city || "") || cmp(a.metadata.name, b.metadata.name))]);
}

function card(name) {
  const wl = h("span", { class: "wl", dataset: { testid: "water-level" } });
  // A plain bar (a thousand native <meter>s cost more to lay out); the text beside it is what is read out.
  const fill = h("span", { class: "fill" });
  const meter = h("span", { class: "bar", "aria-hidden": "true" }, fill);
  const where = h("span", { class: "where" });
  const flags = h("span", { class: "flags" });
  const reportAge = h("span", { class: "age" });
  const el = h("a", { class: "card", href: `#/clusters/${encodeURIComponent(name)}`, dataset: { cluster: name } },
    h("span", { class: "name" }, name), where, h("span", { class: "gauge" }, meter, wl), flags, reportAge);
  return { el, wl, fill, where, flags, reportAge, key: "" };
}

export default {
  id: "fleet",
  title: "Fleet",
  nav: true,
  route: /^fleet$/,
  visible: () => true,
  render(main, { live }) {
    const summary = h("p", { class: "summary", "aria-live": "polite" });
    const grid = h("div", { class: "fleet" });
    replace(main, h("h1", {}, "Fleet"), summary, grid);
    const cards = new Map();
    let layout = "";
    // Written only when the text changes: a live update of one cluster touches one card, not 1,000.
    const setAge = (entry, name) => {
      const text = `report ${age(live.realtime.reportAge(name))}`;
      if (entry.reportAge.textContent !== text) entry.reportAge.textContent = text;
    };

    const draw = () => {
      const started = performance.now();
      const clusters = live.clusters.items;
      const rt = live.realtime.body;
      if (!live.clusters.loaded) { summary.textContent = "Loading clusters…"; return; }
      const grouped = groups(clusters);
      const sig = grouped.map(([r, l]) => `${r}:${l.map((c) => `${c.spec.city}/${c.metadata.name}`)}`).join("|");
      if (sig !== layout) {
        layout = sig;
        const sections = [];
        for (const [region, list] of grouped) {
          const items = list.map((c) => {
            let entry = cards.get(c.metadata.name);
            if (!entry) { entry = card(c.metadata.name); cards.set(c.metadata.name, entry); }
            return h("li", {}, entry.el);
          });
          const id = `region-${region.replace(/[^a-z0-9-]/gi, "_")}`;
          sections.push(h("section", { "aria-labelledby": id }, h("h2", { id }, region), h("ul", { class: "cards" }, items)));
        }
        for (const name of [...cards.keys()]) if (!clusters.has(name)) cards.delete(name);
        replace(grid, sections);
      }
      for (const [name, entry] of cards) {
        const c = clusters.get(name);
        const r = live.realtime.cluster(name);
        const wl = r ? r.waterLevel : (c.status && c.status.resourceSummary ? c.status.resourceSummary.waterLevel : null);
        const isReady = ready(c);
        const taints = (c.spec.taints || []).length;
        const key = [wl, isReady, c.spec.unschedulable, taints, c.spec.syncMode, c.spec.city, r && r.active].join();
        if (key !== entry.key) {
          entry.key = key;
          entry.wl.textContent = pct(wl);
          entry.el.dataset.level = level(wl);
          entry.fill.style.width = `${wl === null || wl === undefined ? 0 : Math.min(100, Math.round(wl * 100))}%`;
          entry.where.textContent = [c.spec.city, c.spec.provider].filter(Boolean).join(" · ") || "—";
          replace(entry.flags,
            isReady === "True" ? badge("Ready", "ok") : badge(isReady === "False" ? "Not ready" : "Unknown", "bad"),
            c.spec.unschedulable ? badge("Cordoned", "warn") : null,
            taints ? badge(`${taints} taint${taints > 1 ? "s" : ""}`, "warn") : null,
            badge(c.spec.syncMode || "Push"));
          entry.el.setAttribute("aria-label",
            `${name}, water level ${pct(wl)}, ${isReady === "True" ? "ready" : "not ready"}`
            + `${c.spec.unschedulable ? ", cordoned" : ""}${taints ? `, ${taints} taints` : ""}`);
        }
        setAge(entry, name);
      }
      const fleetWl = rt && rt.waterLevel ? rt.waterLevel.fleet : null;
      performance.measure("drods:fleet draw", { start: started }); // for bench/ui.py
      summary.textContent = `${clusters.size} clusters · ${rt ? rt.activeClusters : "?"} active · fleet water level `
        + `${pct(fleetWl)} · ${rt ? rt.totalPods : "?"} pods · traffic ${rt ? rt.networkTraffic : "?"}`;
    };
    const offs = [live.clusters.subscribe(draw), live.realtime.subscribe(draw)];
    const tick = setInterval(() => {
      for (const [name, entry] of cards) setAge(entry, name);
    }, 5000);
    draw();
    return () => { offs.forEach((off) => off()); clearInterval(tick); };
  },
};
