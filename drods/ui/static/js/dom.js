// Building the DOM without innerHTML: every value from the API becomes text, never markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// Water level 0..1 → the integer percentage the contract promises ("NN%").
export function pct(value) {
  return value === null || value === undefined || Number.isNaN(value) ? "—" : `${Math.round(value * 100)}%`;
}

export function level(value) {
  if (value === null || value === undefined) return "unknown";
  return value >= 0.85 ? "high" : value >= 0.6 ? "raised" : "normal";
}

export function age(seconds) {
  if (seconds === null || seconds === undefined) return "never";
  if (seconds < 1) return "just now";
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { hour12: false });
}

export function num(value, digits = 1) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  return Number(value).toLocaleString(undefined, { maximumFractionDigits: digits });
}

export function table(caption, headers, rows, attrs = {}) {
  return h("table", attrs,
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows));
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}` }, text);
}

export function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, err && err.message ? err.message : String(err));
}

// Run ``redraw`` (which rebuilds part of ``container``) without losing keyboard focus: a live
// update must not throw a keyboard user back to the top of the page. The focused link or button
// is found again by its href or its text.
export function keepFocus(container, redraw) {
  const active = document.activeElement;
  const inside = active && active !== document.body && container.contains(active);
  const href = inside ? active.getAttribute("href") : null;
  const label = inside ? active.textContent : null;
  const tag = inside ? active.tagName : null;
  redraw();
  if (!inside || container.contains(active)) return;
  const again = href ? container.querySelector(`a[href="${CSS.escape(href)}"]`) : sameLabel(container, tag, label)
    || container.querySelector(tag);
  if (again) again.focus();
}

// The element of ``container`` with tag ``tag`` and text ``label`` (a rebuilt button), or null.
export function sameLabel(container, tag, label) {
  return [...container.querySelectorAll(tag)].find((el) => el.textContent === label) || null;
}
