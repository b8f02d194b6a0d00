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
export function lineChart({ title, series, yMax = 1, yFormat = (v) => `${Math.round(v * 100)}%`,
                            width = 640, height = 220 }) {
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
  const top = Math.max(yMax, ...all.map((p) => p.v));
  const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * w;
  const y = (v) => pad.t + hgt - (v / top) * hgt;
  for (const frac of [0, 0.25, 0.5, 0.75, 1]) {
    const v = top * frac;
    svg.append(s("line", { x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(s("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" }, yFormat(v)));
  }
  const fmt = (t) => new Date(t).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hour12: false });
  svg.append(s("text", { x: pad.l, y: height - 8, class: "axis" }, fmt(t0)));
  svg.append(s("text", { x: width - pad.r, y: height - 8, "text-anchor": "end", class: "axis" }, fmt(t1)));
  for (const line of series) {
    const pts = line.points.filter((p) => p.v !== null && p.v !== undefined);
    if (!pts.length) continue;
    const d = pts.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
    svg.append(s("path", { d, class: `series ${line.cls || ""}`, ...(line.dashed ? { "stroke-dasharray": "6 4" } : {}) }));
    if (pts.length === 1) svg.append(s("circle", { cx: x(pts[0].t), cy: y(pts[0].v), r: 3, class: `dot ${line.cls || ""}` }));
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
