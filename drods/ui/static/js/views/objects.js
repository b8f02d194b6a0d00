// A view of any Kubernetes-style collection, live while it is open (list, then watch): how
// views of later kinds (steering routes, migrations, autoscalers) are made — a module of a few
// lines calling objectList, and a line in views/index.js.

import { h, keepFocus, replace, table } from "../dom.js";
import { ObjectSet } from "../live.js";

// columns: [[header, (object) => text or element], …]; the first column is the name.
export function objectList({ id, title, path, caption, columns, empty }) {
  return {
    id,
    title,
    nav: true,
    route: new RegExp(`^${id}$`),
    visible: () => true,
    render(main, { session, say }) {
      const holder = h("div", { class: "scroll" }, h("p", { class: "muted" }, "Loading…"));
      replace(main, h("h1", {}, title), holder);
      const controller = new AbortController();
      const objects = new ObjectSet(session, path, (err) => { if (err) say(`${title}: ${err.message}`); });
      const draw = () => {
        const items = [...objects.items.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
        keepFocus(holder, () => replace(holder, items.length
          ? table(caption, ["Name", ...columns.map(([header]) => header)], items.map((o) =>
            h("tr", { dataset: { name: o.metadata.name } }, h("th", { scope: "row" }, o.metadata.name),
              columns.map(([, cell]) => h("td", {}, cell(o) ?? "—")))), { class: "data" })
          : h("p", { class: "muted" }, empty || `No ${title.toLowerCase()}.`)));
      };
      const off = objects.subscribe(draw);
      objects.run(controller.signal);
      return () => { off(); controller.abort(); };
    },
  };
}
