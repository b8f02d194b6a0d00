// What-if: dry-run a workload (a binding body) against the live fleet with hypothetical changes —
// clusters down, cordoned, at another water level — through POST /api/v1/whatif (nothing is stored),
// with the scheduler's explanation; and `drods simulate` reports (summary.json + PNG plots) loaded
// from disk, two side by side. The server keeps no simulation report: they are read in the browser.

import { errorBox, h, num, replace, table } from "../dom.js";
import { explanation } from "../explain.js";

const EXAMPLE = JSON.stringify({ replicas: 3, resources: { cpu: 0.5, memory: 0.5 } }, null, 2);

function field(label, control) {
  return h("label", { class: "field" }, h("span", {}, label), control);
}

function changes(form) {
  const out = [];
  for (const c of form.querySelectorAll("input[name=down]:checked")) out.push({ cluster: c.value, down: true });
  for (const c of form.querySelectorAll("input[name=cordon]:checked")) out.push({ cluster: c.value, cordon: true });
  const [cl, lvl] = [form.elements.wlCluster.value, form.elements.wlValue.value];
  if (cl && lvl !== "") out.push({ cluster: cl, waterLevel: Number(lvl) / 100 });
  return out;
}

function clusterChecks(name, legend, clusters) {
  return h("fieldset", {}, h("legend", {}, legend), clusters.map((c) =>
    h("label", { class: "check" }, h("input", { type: "checkbox", name, value: c }), ` ${c}`)));
}

// One report: its figures per policy (summary.json) and its plots.
async function readReport(files) {
  const list = [...files];
  const summary = list.find((f) => f.name === "summary.json");
  if (!summary) throw new Error("choose a report folder (or files) with summary.json");
  const body = JSON.parse(await summary.text());
  const plots = await Promise.all(list.filter((f) => f.name.endsWith(".png")).map((f) => new Promise((ok, bad) => {
    const r = new FileReader();
    r.onload = () => ok({ name: f.name, url: r.result });
    r.onerror = () => bad(r.error);
    r.readAsDataURL(f);
  })));
  return { body, plots };
}

function reportView(title, { body, plots }) {
  const pol = body.policies || {};
  const names = Object.keys(pol);
  const metrics = [...new Set(names.flatMap((n) => Object.keys(pol[n])))];
  return h("section", { class: "report", dataset: { testid: "report" } }, h("h3", {}, `${title}: ${body.scenario || "?"} (seed ${body.seed ?? "?"})`),
    table(`Figures per policy of ${title}`, ["Figure", ...names], metrics.map((m) => h("tr", {}, h("th", { scope: "row" }, m),
      names.map((n) => h("td", { class: "num" }, num(pol[n][m], 3))))), { class: "data" }),
    plots.map((p) => h("figure", {}, h("img", { src: p.url, alt: `${title}: ${p.name}`, class: "plot" }), h("figcaption", {}, p.name))));
}

export default {
  id: "whatif",
  title: "What-if",
  nav: true,
  route: /^whatif$/,
  visible: () => true,
  render(main, { session, live }) {
    const result = h("div", { dataset: { testid: "whatif-result" }, "aria-live": "polite" });
    const body = h("textarea", { name: "body", rows: "8", cols: "60", spellcheck: "false" }, EXAMPLE);
    const pickers = h("div", { class: "assumptions" });
    const level = h("select", { name: "wlCluster" }, h("option", { value: "" }, "—"));
    const form = h("form", { class: "whatif", "aria-label": "Dry-run a placement" },
      field("Binding (the body of POST /api/v1/bindings, JSON)", body), pickers,
      h("fieldset", {}, h("legend", {}, "Assume a water level"), field("Cluster", level),
        field("Water level (%)", h("input", { name: "wlValue", type: "number", min: "0", max: "200", step: "1" }))),
      h("button", { type: "submit" }, "Dry-run"));
    // The clusters to assume things of, as the live list has them (opened by its address, the page
    // renders before the list arrives); what was ticked or chosen stays so.
    let shown = null;
    const drawPickers = () => {
      const clusters = [...live.clusters.items.keys()].sort();
      if (shown === clusters.join("\n")) return;
      shown = clusters.join("\n");
      const ticked = new Set([...form.querySelectorAll("input[type=checkbox]:checked")].map((c) => `${c.name}/${c.value}`));
      const chosen = level.value;
      replace(pickers, clusterChecks("down", "Assume down", clusters), clusterChecks("cordon", "Assume cordoned", clusters));
      for (const c of pickers.querySelectorAll("input[type=checkbox]")) c.checked = ticked.has(`${c.name}/${c.value}`);
      replace(level, h("option", { value: "" }, "—"), clusters.map((c) => h("option", { value: c }, c)));
      level.value = clusters.includes(chosen) ? chosen : "";
    };
    drawPickers();
    // A submit the browser blocks (water level out of 0–200) fires no submit: the last answer must not
    // stay, as if it were the answer to the new input.
    form.addEventListener("invalid", (ev) => {
      const input = ev.target;
      const name = (input.closest("label") || {}).textContent || input.name;
      replace(result, errorBox(new Error(`Not dry-run: ${name.trim()}: ${input.validationMessage}`)));
    }, true);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      replace(result, h("p", { class: "muted" }, "Dry-running…"));
      let binding;
      try { binding = JSON.parse(body.value); } catch (err) { replace(result, errorBox(new Error(`The binding is not JSON: ${err.message}`))); return; }
      try {
        const out = await session.post("/api/v1/whatif", { binding, changes: changes(form) });
        replace(result, h("p", { class: "lead" }, `${out.phase}: `, out.placement.map((p) => `${p.cluster} ×${p.replicas}`).join(", ") || "nowhere"),
          explanation(out.explanation));
      } catch (err) { replace(result, errorBox(err)); }
    });
    const reports = h("div", { class: "side-by-side", dataset: { testid: "reports" } });
    const slots = [null, null];
    const picker = (i) => field(`Report ${i ? "B" : "A"} (a drods simulate --out folder)`,
      h("input", { type: "file", multiple: true, webkitdirectory: true, accept: ".json,.png", onchange: async (ev) => {
        try { slots[i] = await readReport(ev.target.files); } catch (err) { slots[i] = { error: err }; }
        replace(reports, slots.map((r, k) => (r ? (r.error ? errorBox(r.error) : reportView(k ? "B" : "A", r)) : null)));
      } }));
    replace(main, h("h1", {}, "What-if"),
      h("section", { "aria-labelledby": "h-dry" }, h("h2", { id: "h-dry" }, "Dry-run against the live fleet"), form, result),
      h("section", { "aria-labelledby": "h-sim" }, h("h2", { id: "h-sim" }, "Simulation reports"),
        h("p", { class: "muted" }, "The server keeps no report of drods simulate runs; load one or two report folders to compare."),
        picker(0), picker(1), reports));
    return live.clusters.subscribe(drawPickers);
  },
};
