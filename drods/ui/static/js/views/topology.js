// Topology: a workload → its Binding → the Work for each cluster → the objects in each member with
// their health, as a graph (columns left to right) and, for keyboards and screen readers, the same
// tree as nested lists. Works are listed by the Binding they carry (`fieldSelector=spec.binding=NAME`).

import { svgNode as s } from "../charts.js";
import { badge, errorBox, h, keepFocus, replace, scrollRegion } from "../dom.js";
import { phaseBadge } from "./workloads.js";

const WORKS = "/apis/multicluster.io/v1alpha1/works";

// Health of one object in a member, from the status the Work read back.
export function health(m) {
  if (!m.status) return ["missing", "bad"];
  const st = m.status;
  if (st.replicas !== undefined) {
    const ready = st.readyReplicas ?? 0;
    return [`${ready}/${st.replicas} ready`, ready >= st.replicas ? "ok" : "warn"];
  }
  const failed = (st.conditions || []).find((c) => c.status === "False" && c.type !== "Progressing");
  return failed ? [`${failed.type}: ${failed.reason || failed.status}`, "bad"] : ["present", "ok"];
}

// Text cut to what fits ``room`` user units (semibold 12px: at most ~7.6 units a character), with "…".
export function fit(text, room, perChar = 7.6) {
  const most = Math.max(4, Math.floor(room / perChar));
  return text.length > most ? `${text.slice(0, most - 1)}…` : text;
}

function node(svg, x, y, w, label, sub, kind) {
  const g = s("g", {});
  g.append(s("title", {}, `${label} — ${sub}`));  // the whole name, when it is cut
  g.append(s("rect", { x, y, width: w, height: 40, rx: 6, class: `node ${kind}` }));
  g.append(s("text", { x: x + 8, y: y + 17, class: "node-label" }, fit(label, w - 16)));
  g.append(s("text", { x: x + 8, y: y + 33, class: "axis" }, fit(sub, w - 16, 6.6)));
  svg.append(g);
}

function graph(binding, works) {
  const objects = works.flatMap((w) => ((w.status || {}).manifests || []).map((m) => ({ w, m })));
  const rows = Math.max(objects.length, works.length, 1);
  const height = rows * 52 + 16;
  const col = [8, 188, 368, 548];
  const svg = s("svg", { viewBox: `0 0 760 ${height}`, role: "img", class: "chart topology",
    "aria-label": `Topology of ${binding.metadata.name}: ${works.length} works, ${objects.length} member objects` });
  svg.append(s("title", {}, `Topology of ${binding.metadata.name}`));
  const mid = (i, n) => 8 + (i + 0.5) * ((height - 16) / Math.max(n, 1)) - 20;
  const r = binding.spec.resource || {};
  const yW = mid(0, 1);
  node(svg, col[0], yW, 170, `${r.kind || "Binding"} ${r.name || binding.metadata.name}`, r.namespace || "", "workload");
  node(svg, col[1], yW, 170, binding.metadata.name, (binding.status || {}).phase || "Pending", "binding");
  svg.append(s("line", { x1: col[0] + 170, y1: yW + 20, x2: col[1], y2: yW + 20, class: "edge" }));
  works.forEach((w, i) => {
    const y = mid(i, works.length);
    node(svg, col[2], y, 170, w.spec.cluster, (w.status || {}).applied ? "applied" : "not applied", "work");
    svg.append(s("line", { x1: col[1] + 170, y1: yW + 20, x2: col[2], y2: y + 20, class: "edge" }));
  });
  objects.forEach(({ w, m }, i) => {
    const y = mid(i, objects.length);
    const [text, kind] = health(m);
    node(svg, col[3], y, 200, `${m.kind} ${m.name}`, text, `obj ${kind}`);
    const wy = mid(works.indexOf(w), works.length);
    svg.append(s("line", { x1: col[2] + 170, y1: wy + 20, x2: col[3], y2: y + 20, class: "edge" }));
  });
  return svg;
}

function tree(binding, works) {
  const r = binding.spec.resource || {};
  return h("ul", { class: "tree", dataset: { testid: "topology-tree" } },
    h("li", {}, `${r.kind || "Binding"} ${r.namespace ? `${r.namespace}/` : ""}${r.name || binding.metadata.name}`,
      h("ul", {}, h("li", {}, "Binding ", binding.metadata.name, " ", phaseBadge((binding.status || {}).phase),
        h("ul", {}, works.map((w) => h("li", { dataset: { cluster: w.spec.cluster } }, "Work on ", w.spec.cluster, " ",
          badge((w.status || {}).applied ? "applied" : "not applied", (w.status || {}).applied ? "ok" : "warn"),
          h("ul", {}, ((w.status || {}).manifests || []).map((m) => {
            const [text, kind] = health(m);
            return h("li", { dataset: { object: `${m.kind}/${m.name}` } }, `${m.kind} ${m.namespace ? `${m.namespace}/` : ""}${m.name} `, badge(text, kind));
          })))))))));
}

// The binding's Works, selected by the Binding they carry (its label holds a hash of a long name).
async function worksOf(session, name) {
  return (await session.get(WORKS, { fieldSelector: `spec.binding=${name}` })).items;
}

export default {
  id: "topology",
  title: "Topology",
  nav: true,
  route: /^topology(?:\/([^/]+))?$/,
  visible: () => true,
  render(main, { session, live }, [name]) {
    const holder = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    replace(main, h("h1", {}, name ? `Topology of ${name}` : "Topology"), holder);
    let shown = "";
    const draw = async () => {
      if (!name) {
        const names = [...live.bindings.items.keys()].sort();
        keepFocus(holder, () => replace(holder, names.length
          ? h("ul", { class: "links" }, names.map((n) => h("li", {}, h("a", { href: `#/topology/${encodeURIComponent(n)}` }, n))))
          : h("p", { class: "muted" }, live.bindings.loaded ? "No workloads." : "Loading…")));
        return;
      }
      const b = live.bindings.items.get(name);
      if (!b) { replace(holder, h("p", { class: "muted" }, live.bindings.loaded ? `No workload named ${name}.` : "Loading…")); return; }
      try {
        const works = (await worksOf(session, name)).sort((a, c) => a.spec.cluster.localeCompare(c.spec.cluster));
        const key = JSON.stringify([b.status, works.map((w) => w.status)]);
        if (key === shown) return;
        shown = key;
        keepFocus(holder, () => replace(holder,
          scrollRegion(`Topology graph of ${name}`, {}, h("figure", {}, graph(b, works))), tree(b, works)));
      } catch (err) { replace(holder, errorBox(err)); }
    };
    const off = live.bindings.subscribe(draw);
    draw();
    const timer = setInterval(draw, 10_000);
    return () => { off(); clearInterval(timer); };
  },
};
