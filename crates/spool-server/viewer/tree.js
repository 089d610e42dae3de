// The provenance tree: per turn, each agent with the items it produced;
// an item whose envelope names a parent (a tool's output under the call
// that made it) sits under that parent; a handoff is an edge from one
// agent to the next. A turn's branch is built when it is opened, so a big
// thread costs one line per turn until then.

import { h, short, throttled } from "./dom.js";
import { label, statusOf } from "./describe.js";
import { family } from "./thread.js";

export class ProvenanceTree {
  constructor(model, { onSelect }) {
    this.model = model;
    this.onSelect = onSelect;
    this.open = new Set();
    this.el = h("div", { class: "tree", dataset: { testid: "tree" } });
    // Rebuilt once per frame at most, however many events the frame brought.
    this.rebuild = throttled(() => this.build());
  }

  update(kind) {
    if (kind !== "content") this.rebuild();
  }

  build() {
    const rows = this.model.rows().filter((row) => row.type === "turn");
    const last = rows.at(-1)?.turn?.id;
    if (last && !this.opened) {
      this.open.add(last);
      this.opened = true;
    }
    const scroll = this.el.scrollTop;
    this.el.replaceChildren(
      ...rows.map((row, i) => {
        const id = row.turn?.id;
        const details = h(
          "details",
          { class: "tree-turn", open: this.open.has(id), dataset: { turn: id } },
          h("summary", {}, `Turn ${i + 1} · ${row.turn?.status ?? ""} · ${row.records.length} items`),
        );
        if (this.open.has(id)) details.append(this.branch(row.records));
        details.addEventListener("toggle", () => {
          if (details.open) {
            this.open.add(id);
            if (details.children.length === 1) details.append(this.branch(row.records));
          } else this.open.delete(id);
        });
        return details;
      }),
    );
    this.el.scrollTop = scroll;
  }

  /** A turn's agents, their items, and the items under those. */
  branch(records) {
    const ids = new Set(records.map((r) => r.item.id));
    const children = new Map();
    const agents = new Map();
    for (const record of records) {
      const parent = record.envelope?.provenance?.parentItemId;
      if (parent && ids.has(parent)) {
        if (!children.has(parent)) children.set(parent, []);
        children.get(parent).push(record);
        continue;
      }
      const agent = record.envelope?.provenance?.agent ?? "?";
      if (!agents.has(agent)) agents.set(agent, []);
      agents.get(agent).push(record);
    }
    const node = (record) => {
      const item = record.item;
      const kids = children.get(item.id) ?? [];
      const line = h(
        "div",
        {
          class: `node fam-${family(item.type)} status-${statusOf(record)}`,
          dataset: { item: item.id },
          tabindex: "0",
          onclick: () => this.onSelect(record),
          onkeydown: (e) => e.key === "Enter" && this.onSelect(record),
        },
        h("span", { class: "kind" }, item.type),
        " ",
        item.type === "handoff"
          ? h("span", { class: "edge" }, `${item.fromAgent} ⟶ ${item.toAgent}`)
          : h("span", { class: "label" }, short(label(item), 160)),
      );
      return h("li", {}, line, kids.length ? h("ul", {}, kids.map(node)) : null);
    };
    return h(
      "ul",
      { class: "agents" },
      [...agents].map(([agent, list]) =>
        h("li", { class: "agent" }, h("div", { class: "agent-name" }, `agent: ${agent}`), h("ul", {}, list.map(node))),
      ),
    );
  }
}
