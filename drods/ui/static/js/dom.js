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

// A box that scrolls sideways when its content is wider than the page: focusable (a keyboard user
// scrolls it with the arrow keys) and named, as axe's scrollable-region-focusable asks.
export function scrollRegion(label, attrs = {}, ...children) {
  const { class: cls, ...rest } = attrs || {};
  return h("div", { class: `scroll${cls ? ` ${cls}` : ""}`, tabindex: "0", role: "region", "aria-label": label, ...rest },
    ...children);
}

// A data table in its own scroll region (named by the caption, else by ``attrs.label`` or its columns).
export function table(caption, headers, rows, attrs = {}) {
  const { label, ...rest } = attrs || {};
  return scrollRegion(caption || label || `Table: ${headers.join(", ")}`, {},
    h("table", rest,
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows)));
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}` }, text);
}

// Which fields an API error names: DRO-DS's details.fields[] and a Kubernetes Status's details.causes[].
export function errorFields(err) {
  const details = (err && err.body && typeof err.body === "object" && err.body.details) || {};
  const list = [...(Array.isArray(details.fields) ? details.fields : []),
                ...(Array.isArray(details.causes) ? details.causes : [])];
  return list.filter((f) => f && typeof f === "object" && (f.field || f.message))
    .map((f) => ({ field: f.field ? String(f.field) : "", message: f.message ? String(f.message) : "" }));
}

export function errorBox(err) {
  const fields = errorFields(err);
  return h("div", { class: "error", role: "alert" },
    h("p", {}, err && err.message ? err.message : String(err)),
    fields.length ? h("ul", { class: "fields", dataset: { testid: "error-fields" } }, fields.map((f) =>
      h("li", {}, f.field ? h("code", {}, f.field) : null, f.field && f.message ? ": " : "", f.message))) : null);
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
  const named = inside && active.getAttribute("role") === "region" ? active.getAttribute("aria-label") : null;
  redraw();
  if (!inside || container.contains(active)) return;
  const again = named ? container.querySelector(`[role="region"][aria-label="${CSS.escape(named)}"]`) : href ? container.querySelector(`a[href="${CSS.escape(href)}"]`) : sameLabel(container, tag, label)
    || container.querySelector(tag);
  if (again) again.focus();
}

// The element of ``container`` with tag ``tag`` and text ``label`` (a rebuilt button), or null.
export function sameLabel(container, tag, label) {
  return [...container.querySelectorAll(tag)].find((el) => el.textContent === label) || null;
}
