// One item in full: its envelope, a readable body (growing live while it
// streams), its deltas replayable in order, its final JSON, and the
// provider's data behind a toggle.

import { count, duration, fill, h } from "./dom.js";
import { body, statusOf } from "./describe.js";

function fact(name, value) {
  return [h("dt", {}, name), h("dd", {}, value === undefined || value === null || value === "" ? "—" : String(value))];
}

function deltaText(message) {
  return message.params?.delta ?? "";
}

export class Detail {
  constructor(model, { onClose }) {
    this.model = model;
    this.onClose = onClose;
    this.record = null;
    this.el = h("aside", { class: "detail", hidden: true, dataset: { testid: "detail" }, "aria-label": "item" });
    this.replaying = null;
  }

  show(record) {
    this.record = record;
    this.stopReplay();
    this.el.hidden = false;
    this.draw();
  }

  hide() {
    this.stopReplay();
    this.record = null;
    this.el.hidden = true;
    this.onClose?.();
  }

  /** Keeps the shown item current as events change it. */
  update(kind, itemId) {
    if (!this.record) return;
    if (kind === "content" && itemId !== this.record.item.id) return;
    const now = this.model.byId.get(this.record.item.id);
    if (!now) return;
    this.record = now;
    if (this.replaying) return;
    if (kind === "content") {
      fill(this.bodyEl, body(now.item));
      this.jsonEl.textContent = JSON.stringify(now.item, null, 2);
    } else this.draw();
  }

  draw() {
    const r = this.record;
    const env = r.envelope ?? {};
    const prov = env.provenance ?? {};
    const took = env.completedAtMs ? env.completedAtMs - env.startedAtMs : undefined;
    this.bodyEl = h("div", { class: "detail-body" }, body(r.item));
    this.jsonEl = h("pre", { class: "json" }, JSON.stringify(r.item, null, 2));
    this.deltasEl = h("div", { class: "deltas" }, h("button", { class: "small load-deltas", onclick: () => this.loadDeltas() }, "Load deltas"));
    fill(
      this.el,
      h(
        "header",
        {},
        h("h3", {}, h("span", { class: "kind" }, r.item.type), " ", h("code", {}, r.item.id)),
        h("button", { class: "close", title: "Close (Esc)", "aria-label": "close", onclick: () => this.hide() }, "×"),
      ),
      h(
        "dl",
        { class: "facts envelope" },
        fact("status", statusOf(r)),
        fact("agent", prov.agent),
        fact("parent item", prov.parentItemId),
        fact("phase", prov.phase),
        fact("step", prov.stepIndex),
        fact("attempt", prov.attempt),
        fact("audience", env.audience ? [env.audience.client && "client", env.audience.llm && "llm"].filter(Boolean).join(" + ") || "none" : undefined),
        fact("started", env.startedAtMs ? new Date(env.startedAtMs).toLocaleTimeString() : undefined),
        fact("duration", duration(took)),
        fact("tokens", r.tokenCount === undefined ? undefined : count(r.tokenCount)),
        fact("turn", r.turnId),
        fact("seq", `${r.ordinal} → ${r.seq}`),
      ),
      this.bodyEl,
      h("section", { class: "block" }, h("h4", {}, "deltas"), this.deltasEl),
      h("details", { class: "block", open: true }, h("summary", {}, "item JSON"), this.jsonEl),
      env.providerData === undefined
        ? null
        : h("details", { class: "block provider-data" }, h("summary", {}, "providerData"), h("pre", { class: "json" }, JSON.stringify(env.providerData, null, 2))),
    );
  }

  async loadDeltas() {
    const record = this.record;
    fill(this.deltasEl, "loading…");
    let events;
    try {
      events = await this.model.itemEvents(record);
    } catch (error) {
      fill(this.deltasEl, h("span", { class: "error" }, error.message));
      return;
    }
    if (this.record !== record) return;
    const deltas = events.filter((m) => /delta|Delta|progress/.test(m.method));
    const list = h(
      "ol",
      { class: "delta-list" },
      deltas.slice(0, 2000).map((m) => h("li", {}, h("code", {}, `#${m.params.seq}`), " ", JSON.stringify(deltaText(m)))),
    );
    fill(
      this.deltasEl,
      h("div", {}, `${deltas.length} deltas, ${events.length} events `, deltas.length ? h("button", { class: "small replay", onclick: () => this.replay(deltas) }, "Replay") : null),
      list,
    );
  }

  /** Plays the deltas back in order into the body, as they streamed. */
  replay(deltas) {
    this.stopReplay();
    const out = h("pre", { class: "message replaying" }, "");
    fill(this.bodyEl, h("section", { class: "block" }, h("h4", {}, "replay"), out));
    let i = 0;
    const step = Math.max(1, Math.ceil(deltas.length / 200));
    this.replaying = setInterval(() => {
      for (let k = 0; k < step && i < deltas.length; k++, i++) out.textContent += deltaText(deltas[i]);
      if (i >= deltas.length) {
        this.stopReplay();
        out.classList.remove("replaying");
      }
    }, 16);
  }

  stopReplay() {
    if (this.replaying) clearInterval(this.replaying);
    this.replaying = null;
  }
}
