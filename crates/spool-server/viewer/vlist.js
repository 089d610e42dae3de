// A virtualized list: rows of one fixed height, of which only those in
// view (and a few around them) exist in the document, so a thread of ten
// thousand items scrolls as smoothly as one of ten.

import { h } from "./dom.js";

const OVERSCAN = 8;

export class VirtualList {
  /**
   * `render(row, index)` returns the element of one row; `onNearEnd()`,
   * when given, is called as the view nears the last row (to fetch more).
   */
  constructor({ rowHeight, render, onNearEnd, label }) {
    this.rowHeight = rowHeight;
    this.render = render;
    this.onNearEnd = onNearEnd;
    this.rows = [];
    this.spacer = h("div", { class: "vspacer" });
    this.layer = h("div", { class: "vlayer", role: "list" });
    this.el = h("div", { class: "vlist", tabindex: "0", "aria-label": label ?? "list" }, this.spacer, this.layer);
    this.el.addEventListener("scroll", () => this.schedule(), { passive: true });
    new ResizeObserver(() => this.schedule()).observe(this.el);
    this.pending = false;
    this.drawn = { from: -1, to: -1, version: -1 };
    this.version = 0;
  }

  setRows(rows) {
    this.rows = rows;
    this.version++;
    this.spacer.style.height = `${rows.length * this.rowHeight}px`;
    this.schedule();
  }

  /** Draws the rows in view again (their content changed). */
  refresh() {
    this.version++;
    this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  draw() {
    const height = this.el.clientHeight || 600;
    const top = this.el.scrollTop;
    const from = Math.max(0, Math.floor(top / this.rowHeight) - OVERSCAN);
    const to = Math.min(this.rows.length, Math.ceil((top + height) / this.rowHeight) + OVERSCAN);
    const d = this.drawn;
    if (d.from === from && d.to === to && d.version === this.version) return;
    this.drawn = { from, to, version: this.version };
    const elements = [];
    for (let i = from; i < to; i++) {
      const el = this.render(this.rows[i], i);
      el.style.position = "absolute";
      el.style.top = `${i * this.rowHeight}px`;
      el.style.height = `${this.rowHeight}px`;
      el.style.left = "0";
      el.style.right = "0";
      el.setAttribute("role", "listitem");
      elements.push(el);
    }
    this.layer.replaceChildren(...elements);
    if (this.onNearEnd && to >= this.rows.length - OVERSCAN) this.onNearEnd();
  }

  /** Scrolls so that row `index` is in view. */
  reveal(index) {
    const top = index * this.rowHeight;
    const bottom = top + this.rowHeight;
    if (top < this.el.scrollTop) this.el.scrollTop = top;
    else if (bottom > this.el.scrollTop + this.el.clientHeight) {
      this.el.scrollTop = bottom - this.el.clientHeight;
    }
    this.schedule();
  }

  atBottom() {
    return this.el.scrollTop + this.el.clientHeight >= this.el.scrollHeight - this.rowHeight;
  }
}
