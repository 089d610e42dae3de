// The timeline: every turn as a header (status, duration, token usage, fork
// and revert), then its items as a waterfall, each a bar from its start to
// its end on the turn's time axis, coloured by what made it (the model, a
// tool, the user) and by its status.

import { count, duration, h, short, throttled } from "./dom.js";
import { label, statusOf } from "./describe.js";
import { family } from "./thread.js";
import { VirtualList } from "./vlist.js";

const ROW = 30;

/** Each turn's time axis: its first start to its last end. */
function axes(rows) {
  for (const row of rows) {
    if (row.type !== "turn") continue;
    let origin = Infinity;
    let end = -Infinity;
    let open = false;
    for (const r of row.records) {
      const env = r.envelope;
      if (!env) continue;
      origin = Math.min(origin, env.startedAtMs);
      end = Math.max(end, env.completedAtMs ?? env.startedAtMs);
      if (env.completedAtMs === undefined || env.completedAtMs === null) open = true;
    }
    const turn = row.turn ?? {};
    if (turn.startedAt) origin = Math.min(origin, turn.startedAt * 1000);
    row.axis = Number.isFinite(origin) ? { origin, end: Math.max(end, origin + 1), open } : null;
  }
  let axis = null;
  for (const row of rows) {
    if (row.type === "turn") axis = row.axis;
    else row.axis = axis;
  }
}

function usage(turn) {
  const u = turn?.tokenUsage;
  if (!u) return "";
  return `${count(u.inputTokens)} in · ${count(u.outputTokens)} out`;
}

export class Timeline {
  constructor(model, { onSelect, onFork, onRevert }) {
    this.model = model;
    this.onSelect = onSelect;
    this.onFork = onFork;
    this.onRevert = onRevert;
    this.rows = [];
    this.selected = -1;
    this.turnNumbers = new Map();
    this.list = new VirtualList({ rowHeight: ROW, render: (row, i) => this.renderRow(row, i), label: "timeline" });
    this.el = h("div", { class: "timeline", dataset: { testid: "timeline" } }, this.list.el);
    this.list.el.addEventListener("keydown", (e) => this.key(e));
    this.follow = true;
    // A live turn brings many events a frame; the rows (a pass over every
    // item) are rebuilt once per frame at most.
    this.rebuild = throttled(() => this.build());
    this.list.el.addEventListener("scroll", () => {
      this.follow = this.list.atBottom();
    });
  }

  update(kind) {
    if (kind === "content") this.list.refresh();
    else this.rebuild();
  }

  build() {
    this.rows = this.model.rows();
    axes(this.rows);
    let n = 0;
    for (const row of this.rows) if (row.type === "turn") this.turnNumbers.set(row.turn.id, ++n);
    this.list.setRows(this.rows);
    if (this.follow && this.model.loaded) this.list.el.scrollTop = this.list.el.scrollHeight;
  }

  renderRow(row, index) {
    if (row.type === "turn") return this.turnRow(row, index);
    const { record } = row;
    const item = record.item;
    const status = statusOf(record);
    const env = record.envelope ?? {};
    const took = env.completedAtMs ? env.completedAtMs - env.startedAtMs : row.axis?.open ? Date.now() - env.startedAtMs : undefined;
    const el = h(
      "div",
      {
        class: `row item-row fam-${family(item.type)} status-${status}${index === this.selected ? " selected" : ""}`,
        dataset: { item: item.id, kind: item.type, status },
        onclick: () => this.select(index, true),
      },
      h("span", { class: "kind" }, item.type),
      h("span", { class: "label" }, short(label(item), 400)),
      this.bar(row, env),
      h("span", { class: "took" }, duration(took)),
    );
    return el;
  }

  bar(row, env) {
    const track = h("span", { class: "track" });
    const axis = row.axis;
    if (!axis || !env.startedAtMs) return track;
    const end = env.completedAtMs ?? (axis.open ? Date.now() : axis.end);
    const span = Math.max((axis.open ? Math.max(Date.now(), axis.end) : axis.end) - axis.origin, 1);
    const left = ((env.startedAtMs - axis.origin) / span) * 100;
    const width = Math.max(((end - env.startedAtMs) / span) * 100, 0.6);
    track.append(h("span", { class: "bar", style: `left:${left.toFixed(2)}%;width:${Math.min(width, 100 - left).toFixed(2)}%` }));
    return track;
  }

  turnRow(row, index) {
    const turn = row.turn ?? { id: "?" };
    const status = turn.status ?? "unknown";
    const n = this.turnNumbers.get(turn.id);
    const running = status === "inProgress";
    return h(
      "div",
      {
        class: `row turn-row status-${status}${index === this.selected ? " selected" : ""}`,
        dataset: { turn: turn.id, status },
        onclick: () => this.select(index, false),
      },
      h("span", { class: "turn-title" }, `Turn ${n}`),
      h("span", { class: `badge status-${status}` }, status),
      h("span", { class: "meta" }, `${row.records.length} items · ${duration(turn.durationMs)}`),
      h("span", { class: "meta tokens" }, usage(turn)),
      h(
        "span",
        { class: "actions" },
        h("button", { class: "small fork", title: "Fork a new thread with the turns up to this one", disabled: running, onclick: (e) => { e.stopPropagation(); this.onFork(turn.id); } }, "Fork from here"),
        h("button", { class: "small revert", title: "Drop this turn and every later one", disabled: running, onclick: (e) => { e.stopPropagation(); this.onRevert(turn.id, n); } }, "Revert"),
      ),
    );
  }

  select(index, open) {
    if (index < 0 || index >= this.rows.length) return;
    this.selected = index;
    this.list.reveal(index);
    this.list.refresh();
    const row = this.rows[index];
    if (open && row.type === "item") this.onSelect(row.record);
  }

  /** j/k or the arrows move; Enter opens the item. */
  key(e) {
    if (e.target !== this.list.el) return;
    if (e.key === "ArrowDown" || e.key === "j") this.select(this.selected + 1, false);
    else if (e.key === "ArrowUp" || e.key === "k") this.select(Math.max(this.selected - 1, 0), false);
    else if (e.key === "Home") this.select(0, false);
    else if (e.key === "End") this.select(this.rows.length - 1, false);
    else if (e.key === "Enter") this.select(this.selected, true);
    else return;
    e.preventDefault();
  }
}
