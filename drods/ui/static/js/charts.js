// Small inline SVG line charts (no chart library): load history and its forecast.

const NS = "http://www.w3.org/2000/svg";
const s = svgNode;

// One SVG element (the views that draw graphs use it too).
export function svgNode(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// series: [{label, points: [{t: ms, v: number|null}], dashed?, cls}]; y is 0..yMax.
// The chart's user units follow the screen, up to 640: SVG text scales with the viewBox, and 640
// units drawn 330 pixels wide (a phone) made 11px labels 5px.
export function chartWidth() {
  const screen = (typeof window !== "undefined" && window.innerWidth) || 640;
  return Math.round(Math.min(640, Math.max(300, screen - 48)));
}

// integer: a count axis — gridlines at whole numbers (0, 2, 4, 6, not 0, 1.5, 3 labelled "2").
// A point with ``mark`` gets a dot whatever the series' length.
export function lineChart({ title, series, yMax = 1, yFormat = (v) => `${Math.round(v * 100)}%`,
                            width = chartWidth(), height = 220, integer = false }) {
  const pad = { l: 48, r: 12, t: 12, b: 28 };
  const all = series.flatMap((x) => x.points).filter((p) => p.v !== null && p.v !== undefined);
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart",
                         "aria-label": title, preserveAspectRatio: "xMidYMid meet" });
  svg.append(s("title", {}, title));
  const w = width - pad.l - pad.r;
  const hgt = height - pad.t - pad.b;
  if (!all.length) {
    svg.append(s("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "muted" }, "no data yet"));
    return svg;
  }
  // at least ten minutes wide, ending at the latest point: one decision sat on the left edge of a time axis
  // that read "06:00 … 06:00"
  const t1 = Math.max(...all.map((p) => p.t));
  const t0 = Math.min(...all.map((p) => p.t), t1 - 600_000);
  let top = Math.max(yMax, ...all.map((p) => p.v));
  let ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => top * f);
  if (integer) {
    const step = Math.max(1, Math.ceil(top / 4));
    top = Math.max(step, Math.ceil(top / step) * step);
    ticks = [];
    for (let v = 0; v <= top; v += step) ticks.push(v);
  }
  const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * w;
  const y = (v) => pad.t + hgt - (v / top) * hgt;
  for (const v of ticks) {
    svg.append(s("line", { x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(s("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" }, yFormat(v)));
  }
  const fmt = (t) => new Date(t).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hour12: false });
  svg.append(s("text", { x: pad.l, y: height - 8, class: "axis" }, fmt(t0)));
  svg.append(s("text", { x: width - pad.r, y: height - 8, "text-anchor": "end", class: "axis" }, fmt(t1)));
  // the first series on top: the water level (listed first) was hidden under the CPU line when equal
  for (const line of [...series].reverse()) {
    const pts = line.points.filter((p) => p.v !== null && p.v !== undefined);
    if (!pts.length) continue;
    const d = pts.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
    svg.append(s("path", { d, class: `series ${line.cls || ""}`, ...(line.dashed ? { "stroke-dasharray": "6 4" } : {}) }));
    for (const p of pts) {
      if (pts.length === 1 || p.mark) svg.append(s("circle", { cx: x(p.t), cy: y(p.v), r: 3, class: `dot ${line.cls || ""}` }));
    }
  }
  return svg;
}

export function legend(series) {
  const ul = document.createElement("ul");
  ul.className = "legend";
  for (const line of series) {
    const li = document.createElement("li");
    li.className = line.cls || "";
    li.textContent = `${line.dashed ? "┄ " : "— "}${line.label}`;
    ul.append(li);
  }
  return ul;
}
