// The raw event log: every committed event with its seq, read page by page
// (`/log?after=`), filterable by method; new events are appended as the
// stream brings them.

import { api, query } from "./api.js";
import { count, fill, h, short } from "./dom.js";
import { VirtualList } from "./vlist.js";

const ROW = 24;

function gist(message) {
  const p = message.params ?? {};
  if (p.delta !== undefined) return JSON.stringify(p.delta);
  if (p.item) return `${p.item.type} ${p.item.id}`;
  if (p.turn) return `turn ${p.turn.id} ${p.turn.status}`;
  return short(JSON.stringify(p), 160);
}

export class EventLog {
  constructor(model) {
    this.model = model;
    this.events = [];
    this.shown = [];
    this.cursor = 0;
    this.done = false;
    this.loading = false;
    this.methods = new Set();
    this.filter = h("select", { class: "method-filter", "aria-label": "filter by method", dataset: { testid: "log-filter" } }, h("option", { value: "" }, "every method"));
    this.filter.addEventListener("change", () => this.apply());
    this.countEl = h("span", { class: "meta" });
    this.json = h("pre", { class: "json event-json", hidden: true });
    this.list = new VirtualList({
      rowHeight: ROW,
      label: "event log",
      render: (m) =>
        h(
          "div",
          { class: "row log-row", dataset: { seq: m.params?.seq, method: m.method }, onclick: () => this.open(m) },
          h("span", { class: "seq" }, m.params?.seq ?? ""),
          h("span", { class: "method" }, m.method),
          h("span", { class: "label" }, gist(m)),
        ),
      onNearEnd: () => this.more(),
    });
    this.el = h("div", { class: "log", dataset: { testid: "log" } }, h("div", { class: "log-bar" }, this.filter, this.countEl), this.list.el, this.json);
    this.started = false;
  }

  shownNow() {
    if (!this.started) {
      this.started = true;
      this.more();
    }
  }

  async more() {
    if (this.loading || this.done) return;
    this.loading = true;
    try {
      const page = await api(`/v1/threads/${encodeURIComponent(this.model.id)}/log${query({ after: this.cursor, limit: 1000 })}`);
      this.add(page.data);
      if (page.nextCursor === null || page.nextCursor === undefined) this.done = true;
      else this.cursor = page.nextCursor;
    } finally {
      this.loading = false;
    }
  }

  add(messages) {
    let last = this.events.at(-1)?.params?.seq ?? 0;
    for (const m of messages) {
      const seq = m.params?.seq;
      if (seq === undefined || seq <= last) continue;
      last = seq;
      this.events.push(m);
      if (!this.methods.has(m.method)) {
        this.methods.add(m.method);
        this.filter.append(h("option", { value: m.method }, m.method));
      }
    }
    if (last) this.cursor = Math.max(this.cursor, last);
    this.apply();
  }

  /** A live event: appended once the log is read to its end. */
  update(kind, message) {
    if (kind === "event" && this.done && message?.params?.seq !== undefined) this.add([message]);
  }

  apply() {
    const method = this.filter.value;
    this.shown = method ? this.events.filter((m) => m.method === method) : this.events;
    this.countEl.textContent = `${count(this.shown.length)} of ${count(this.events.length)}${this.done ? "" : "+"} events`;
    const follow = this.list.atBottom();
    this.list.setRows(this.shown);
    if (follow && this.done) this.list.el.scrollTop = this.list.el.scrollHeight;
  }

  open(message) {
    this.json.hidden = false;
    fill(this.json, JSON.stringify(message, null, 2));
  }
}
