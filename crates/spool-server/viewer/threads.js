// The thread list: searchable, with archived threads behind a toggle,
// refreshed every few seconds while the page is visible (the server has no
// stream of its thread list).

import { api, query } from "./api.js";
import { fill, h, short, when } from "./dom.js";

const REFRESH_MS = 3000;

export function statusName(status) {
  return typeof status === "string" ? status : status?.type ?? "unknown";
}

export class ThreadList {
  constructor({ onOpen, onError }) {
    this.onOpen = onOpen;
    this.onError = onError;
    this.current = null;
    this.search = h("input", { type: "search", placeholder: "Search threads  ( / )", "aria-label": "search threads", class: "search", dataset: { testid: "thread-search" } });
    this.archived = h("input", { type: "checkbox", "aria-label": "archived threads" });
    this.listEl = h("ul", { class: "threads", dataset: { testid: "threads" } });
    this.more = h("button", { class: "small more", hidden: true, onclick: () => this.load(true) }, "More");
    this.el = h(
      "nav",
      { class: "sidebar", "aria-label": "threads" },
      this.search,
      h("label", { class: "toggle" }, this.archived, " archived"),
      this.listEl,
      this.more,
    );
    this.threads = [];
    this.cursor = null;
    let typing;
    this.search.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => this.load(false), 200);
    });
    this.archived.addEventListener("change", () => this.load(false));
    this.timer = setInterval(() => {
      if (document.visibilityState === "visible") this.load(false, true);
    }, REFRESH_MS);
  }

  /** Reads the first page again (or the next, with `next`). */
  async load(next, quiet) {
    const ask = (this.asked = (this.asked ?? 0) + 1);
    try {
      const page = await api(
        `/v1/threads${query({
          limit: 100,
          search: this.search.value.trim(),
          archived: this.archived.checked ? "true" : undefined,
          sortKey: "updated_at",
          cursor: next ? this.cursor : undefined,
        })}`,
      );
      if (ask !== this.asked) return;
      this.threads = next ? this.threads.concat(page.data) : page.data;
      this.cursor = page.nextCursor;
      this.more.hidden = !this.cursor;
      this.draw();
    } catch (error) {
      if (!quiet) this.onError(error);
    }
  }

  select(threadId) {
    this.current = threadId;
    this.draw();
  }

  draw() {
    fill(
      this.listEl,
      this.threads.length === 0 ? h("li", { class: "empty" }, "No threads") : null,
      this.threads.map((t) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              href: `#thread=${encodeURIComponent(t.id)}`,
              class: `thread${t.id === this.current ? " current" : ""}`,
              dataset: { thread: t.id },
            },
            h("span", { class: "title" }, short(t.name || t.preview || "(empty thread)", 80)),
            h(
              "span",
              { class: "meta" },
              h("span", { class: `badge status-${statusName(t.status)}` }, statusName(t.status)),
              ` ${when(t.updatedAt)} · ${t.model ?? t.modelProvider ?? ""} · ${t.historyMode ?? ""}`,
            ),
          ),
        ),
      ),
    );
  }
}
