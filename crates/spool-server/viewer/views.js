// The three views side by side: `all` (every stored item), `client` (what
// a UI is shown) and `llm` (the input of the next model request) — the
// last under a token budget, to see exactly which turns the model gets.
// Each is read from the server (`/items?view=…`), not worked out here.

import { api, query } from "./api.js";
import { count, fill, h, short } from "./dom.js";
import { label, statusOf } from "./describe.js";
import { family } from "./thread.js";
import { VirtualList } from "./vlist.js";

const ROW = 26;

function recordRow(record, onSelect) {
  const item = record.item;
  return h(
    "div",
    { class: `row view-row fam-${family(item.type)} status-${statusOf(record)}`, dataset: { item: item.id }, onclick: () => onSelect(record) },
    h("span", { class: "kind" }, item.type),
    h("span", { class: "label" }, short(label(item), 200)),
  );
}

/** Text of one model input item (a message, a call, a call's output). */
function inputText(entry) {
  if (typeof entry.content === "string") return entry.content;
  if (Array.isArray(entry.content)) return entry.content.map((c) => c.text ?? c.type).join(" ");
  if (entry.type === "function_call") return `${entry.name}(${entry.arguments ?? ""})`;
  if (entry.type === "function_call_output") return typeof entry.output === "string" ? entry.output : JSON.stringify(entry.output);
  if (entry.type === "reasoning") return (entry.summary ?? []).map((s) => s.text).join(" ");
  if (entry.type === "compaction" || entry.type === "compaction_summary") return entry.summary ?? entry.encrypted_content ?? "";
  return JSON.stringify(entry);
}

/** One paged column of `view` (all or client). */
class Column {
  constructor(threadId, view, onSelect) {
    this.threadId = threadId;
    this.view = view;
    this.records = [];
    this.cursor = 0;
    this.loading = false;
    this.done = false;
    this.list = new VirtualList({
      rowHeight: ROW,
      label: `${view} view`,
      render: (record) => recordRow(record, onSelect),
      onNearEnd: () => this.more(),
    });
    this.countEl = h("span", { class: "meta" }, "");
    this.el = h("section", { class: `view-col view-${view}`, dataset: { testid: `view-${view}` } }, h("h3", {}, view, " ", this.countEl), this.list.el);
  }

  async more() {
    if (this.loading || this.done) return;
    this.loading = true;
    try {
      const page = await api(`/v1/threads/${encodeURIComponent(this.threadId)}/items${query({ view: this.view, after: this.cursor, limit: 500 })}`);
      this.records.push(...page.data);
      if (page.nextCursor === null || page.nextCursor === undefined) this.done = true;
      else this.cursor = page.nextCursor;
      this.countEl.textContent = `${count(this.records.length)}${this.done ? "" : "+"} items`;
      this.list.setRows(this.records);
    } finally {
      this.loading = false;
    }
  }

  reload() {
    this.records = [];
    this.cursor = 0;
    this.done = false;
    this.more();
  }
}

export class Views {
  constructor(model, { onSelect }) {
    this.model = model;
    this.columns = [new Column(model.id, "all", onSelect), new Column(model.id, "client", onSelect)];
    this.budget = h("input", { type: "number", min: "0", step: "100", placeholder: "no budget", class: "budget", "aria-label": "token budget", dataset: { testid: "llm-budget" } });
    this.slider = h("input", { type: "range", min: "0", max: "1000", step: "1", class: "budget-slider", "aria-label": "token budget slider" });
    this.summary = h("div", { class: "meta llm-summary", dataset: { testid: "llm-summary" } }, "");
    this.entries = h("ol", { class: "llm-entries", dataset: { testid: "llm-entries" } });
    this.max = 0;
    const changed = (value) => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.readLlm(value === "" ? undefined : Number(value)), 150);
    };
    this.budget.addEventListener("input", () => {
      if (this.max) this.slider.value = String(Math.min(1000, Math.round((Number(this.budget.value) / this.max) * 1000)));
      changed(this.budget.value);
    });
    this.slider.addEventListener("input", () => {
      const tokens = Math.round((Number(this.slider.value) / 1000) * this.max);
      this.budget.value = String(tokens);
      changed(String(tokens));
    });
    const llm = h(
      "section",
      { class: "view-col view-llm", dataset: { testid: "view-llm" } },
      h("h3", {}, "llm"),
      h("label", { class: "budget-row" }, "token budget ", this.budget, this.slider),
      this.summary,
      h("div", { class: "llm-scroll" }, this.entries),
    );
    this.el = h("div", { class: "views", dataset: { testid: "views" } }, ...this.columns.map((c) => c.el), llm);
    this.stale = true;
  }

  /** Reads the views again when shown after the thread changed. */
  update(kind) {
    if (kind === "content" || kind === "event" || kind === "stream") return;
    this.stale = true;
    if (!this.el.isConnected) return;
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refresh(), 300);
  }

  shown() {
    if (this.stale) this.refresh();
  }

  refresh() {
    this.stale = false;
    for (const column of this.columns) column.reload();
    const v = this.budget.value;
    this.readLlm(v === "" ? undefined : Number(v));
  }

  async readLlm(tokens) {
    const ask = (this.asked = (this.asked ?? 0) + 1);
    let view;
    try {
      view = await api(`/v1/threads/${encodeURIComponent(this.model.id)}/items${query({ view: "llm", tokens })}`);
    } catch (error) {
      fill(this.summary, h("span", { class: "error" }, error.message));
      return;
    }
    if (ask !== this.asked) return;
    if (tokens === undefined) this.max = view.totalTokens;
    fill(
      this.summary,
      `${count(view.totalTokens)} tokens · ${count(view.turnsIncluded)} turns included · ${count(view.turnsOmitted)} omitted`,
    );
    fill(
      this.entries,
      view.data.map((entry) =>
        h(
          "li",
          { class: "llm-entry" },
          h("span", { class: "kind" }, entry.role ?? entry.type ?? "item"),
          " ",
          h("span", { class: "label" }, short(inputText(entry), 600)),
        ),
      ),
    );
  }
}
