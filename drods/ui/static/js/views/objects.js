// A view of any Kubernetes-style collection, live while it is open (list, then watch): how
// views of later kinds (steering routes, migrations, autoscalers) are made — a module of a few
// lines calling objectList, and a line in views/index.js.

import { h, keepFocus, replace, table } from "../dom.js";
import { ObjectSet } from "../live.js";

// columns: [[header, (object) => text or element], …]; the first column is the name (namespace/name for
// a namespaced object). sources: [{path, kind}, …] lists several collections in one table, with a Kind column.
export function objectList({ id, title, path, sources, caption, columns, empty }) {
  const from = sources || [{ path }];
  const qualified = (o) => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name);
  return {
    id,
    title,
    nav: true,
    route: new RegExp(`^${id}$`),
    visible: () => true,
    render(main, { session, say }) {
      const holder = h("div", {}, h("p", { class: "muted" }, "Loading…"));
      replace(main, h("h1", {}, title), holder);
      const controller = new AbortController();
      const sets = from.map((source) => ({
        kind: source.kind,
        objects: new ObjectSet(session, source.path, (err) => { if (err) say(`${title}: ${err.message}`); }),
      }));
      const headers = ["Name", ...(sources ? ["Kind"] : []), ...columns.map(([header]) => header)];
      const draw = () => {
        const items = sets.flatMap(({ kind, objects }) => [...objects.items.values()].map((o) => ({ o, kind })))
          .sort((a, b) => qualified(a.o).localeCompare(qualified(b.o)) || String(a.kind).localeCompare(String(b.kind)));
        keepFocus(holder, () => replace(holder, items.length
          ? table(caption, headers, items.map(({ o, kind }) =>
            h("tr", { dataset: { name: qualified(o) } }, h("th", { scope: "row" }, qualified(o)),
              sources ? h("td", {}, kind) : null,
              columns.map(([, cell]) => h("td", {}, cell(o) ?? "—")))), { class: "data" })
          : h("p", { class: "muted" }, empty || `No ${title.toLowerCase()}.`)));
      };
      const offs = sets.map(({ objects }) => objects.subscribe(draw));
      sets.forEach(({ objects }) => objects.run(controller.signal));
      return () => { offs.forEach((off) => off()); controller.abort(); };
    },
  };
}
