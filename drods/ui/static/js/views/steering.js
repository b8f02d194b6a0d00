// Steering (CATS, C4/C7): per service, the route of each client site — the instances, their weight,
// the metric that chose each and its reason, SLA met or best effort — live from the ServiceRoutes;
// and the sites as a graph with their measured latencies (PUT /api/v1/network/status), as a table too.

import { svgNode as s } from "../charts.js";
import { badge, errorBox, h, keepFocus, num, replace, scrollRegion, table, when } from "../dom.js";
import { ObjectSet } from "../live.js";

const ROUTES = "/apis/multicluster.io/v1alpha1/serviceroutes";
const REGISTRATIONS = "/apis/multicluster.io/v1alpha1/serviceregistrations";

const slaOf = (inst) => (inst.metric === "MAX" ? badge("SLA not met — best effort", "bad") : badge("SLA met", "ok"));

// Why a client site has no instance, from the registration's status.message (the steering controller
// writes one clause per unrouted site: "no instance reachable from client site X: …", "no measurement
// from client site X to any instance (…)"); null when it says nothing about the site.
export function unroutedReason(message, site) {
  if (!message) return null;
  const clauses = String(message).split(/;\s*(?=no (?:instance reachable|measurement) from client site )/);
  const mine = clauses.filter((c) => new RegExp(`client site ${site.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\\w-])`).test(c));
  return mine.length ? mine.join("; ") : null;
}

function serviceTable(o, registrations) {
  const spec = o.spec || {};
  const reg = spec.registration || {};
  const registration = registrations.get(`${reg.namespace || "default"}/${reg.name}`);
  const message = ((registration || {}).status || {}).message || "";
  // every client site the registration names, routed or not, in the route's order then the rest
  const routes = [...(spec.routes || [])];
  for (const site of ((registration || {}).spec || {}).clientSites || []) {
    if (!routes.some((r) => r.clientSite === site)) routes.push({ clientSite: site, instances: [] });
  }
  const rows = routes.flatMap((r) => ((r.instances || []).length ? r.instances.map((inst, i) =>
    h("tr", { dataset: { site: r.clientSite, cluster: inst.cluster } },
      i ? h("td", {}) : h("th", { scope: "row", rowspan: String((r.instances || []).length) }, r.clientSite),
      h("td", {}, inst.cluster), h("td", { class: "num" }, num(inst.weight, 2)),
      h("td", { class: "num" }, inst.metric === "MAX" ? "MAX" : num(inst.metric, 2)), h("td", {}, slaOf(inst)),
      h("td", {}, inst.reason || "")))
    : [h("tr", { dataset: { site: r.clientSite, cluster: "" }, class: "unrouted" },
      h("th", { scope: "row" }, r.clientSite), h("td", {}, badge("no instance", "bad")), h("td", { class: "num" }, "—"),
      h("td", { class: "num" }, "—"), h("td", {}, badge("no route", "bad")),
      h("td", {}, unroutedReason(message, r.clientSite)
        || (registration ? "No instance is routed for this client site (the registration says no more)."
          : "No instance is routed for this client site.")))]));
  return h("section", { class: "service", dataset: { service: o.metadata.name } },
    h("h3", {}, `${o.metadata.name}`),
    h("p", { class: "muted" }, `${reg.namespace || "default"}/${reg.name || "?"} · strategy ${spec.strategy || "?"} · `
      + `evaluation ${spec.evaluation || "?"} · ${spec.changes ?? 0} route changes · updated ${when(spec.updated)}`),
    rows.length ? table(`Routes of ${o.metadata.name} per client site`, ["Client site", "Instance", "Weight", "Metric", "SLA", "Why"],
      rows, { class: "data" }) : h("p", { class: "muted" }, "No route yet."));
}

// Client sites on the left, clusters/cities on the right, one line per measured pair.
// Client sites with no measurement (a registration's unrouted site) are drawn too, unconnected.
function siteGraph(measurements, clientSites = []) {
  const left = [...new Set([...measurements.map((m) => m.from), ...clientSites])].sort();
  const right = [...new Set(measurements.map((m) => m.to))].sort();
  const width = 640;
  const rowH = 36;
  const height = Math.max(left.length, right.length, 1) * rowH + 24;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart sites",
    "aria-label": `Measured latency between ${left.length} client sites and ${right.length} sites` });
  svg.append(s("title", {}, "Measured latency between sites"));
  const y = (i, n) => 12 + (i + 0.5) * ((height - 24) / Math.max(n, 1));
  for (const m of measurements) {
    const y1 = y(left.indexOf(m.from), left.length);
    const y2 = y(right.indexOf(m.to), right.length);
    svg.append(s("line", { x1: 150, y1, x2: width - 150, y2, class: "grid" }));
    if (m.delayMs !== undefined && m.delayMs !== null) {
      svg.append(s("text", { x: width / 2, y: (y1 + y2) / 2 - 3, "text-anchor": "middle", class: "axis" }, `${num(m.delayMs, 1)} ms`));
    }
  }
  left.forEach((n, i) => svg.append(s("text", { x: 140, y: y(i, left.length) + 4, "text-anchor": "end" }, n)));
  right.forEach((n, i) => svg.append(s("text", { x: width - 140, y: y(i, right.length) + 4 }, n)));
  return svg;
}

export default {
  id: "steering",
  title: "Steering",
  nav: true,
  route: /^steering$/,
  visible: () => true,
  render(main, { session, say }) {
    const services = h("div", { dataset: { testid: "services" } }, h("p", { class: "muted" }, "Loading…"));
    const sites = h("div", { dataset: { testid: "sites" } }, h("p", { class: "muted" }, "Loading measurements…"));
    replace(main, h("h1", {}, "Steering"),
      h("section", { "aria-labelledby": "h-routes" }, h("h2", { id: "h-routes" }, "Routes per service"), services),
      h("section", { "aria-labelledby": "h-sites" }, h("h2", { id: "h-sites" }, "Sites and measured latency"), sites));
    const controller = new AbortController();
    const routes = new ObjectSet(session, ROUTES, (err) => { if (err) say(`Routes: ${err.message}`); });
    const regs = new ObjectSet(session, REGISTRATIONS, (err) => { if (err) say(`Service registrations: ${err.message}`); });
    const draw = () => {
      const items = [...routes.items.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
      const byName = new Map([...regs.items.values()].map((r) => [`${r.metadata.namespace || "default"}/${r.metadata.name}`, r]));
      keepFocus(services, () => replace(services, items.length ? items.map((o) => serviceTable(o, byName))
        : h("p", { class: "muted" }, "No service registered for steering.")));
    };
    let measured = null;  // the last answer of GET /api/v1/network/status
    const drawSites = () => {
      if (measured === null) return;
      const ms = measured;
      const clientSites = [...regs.items.values()].flatMap((r) => (r.spec || {}).clientSites || []);
      replace(sites, ms.length
        ? [scrollRegion("Graph of measured latency between sites", {}, siteGraph(ms, clientSites)),
          table("Measured pairs", ["From", "To", "Delay", "Jitter", "Loss", "Measured"],
            ms.map((m) => h("tr", {}, h("th", { scope: "row" }, m.from), h("td", {}, m.to),
              h("td", { class: "num" }, m.delayMs == null ? "—" : `${num(m.delayMs, 1)} ms`),
              h("td", { class: "num" }, m.jitterMs == null ? "—" : `${num(m.jitterMs, 1)} ms`),
              h("td", { class: "num" }, m.lossPercent == null ? "—" : `${num(m.lossPercent, 2)}%`),
              h("td", {}, when(m.timestamp)))), { class: "data" })]
        : h("p", { class: "muted" }, "No latency measured yet."));
    };
    let sitesOf = "";
    const loadSites = async () => {
      try {
        measured = (await session.get("/api/v1/network/status")).measurements || [];
        drawSites();
      } catch (err) { replace(sites, errorBox(err)); }
    };
    const offs = [routes.subscribe(draw), regs.subscribe(() => {
      draw();
      const now = [...regs.items.values()].flatMap((r) => (r.spec || {}).clientSites || []).sort().join(",");
      if (now !== sitesOf) { sitesOf = now; drawSites(); }  // a client site added: on the graph too
    })];
    routes.run(controller.signal);
    regs.run(controller.signal);
    loadSites();
    const timer = setInterval(loadSites, 30_000);
    return () => { offs.forEach((off) => off()); controller.abort(); clearInterval(timer); };
  },
};
