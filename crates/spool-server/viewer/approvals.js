// Pending requests (approvals, MCP questions) with what they are about —
// the command, the patch — answered from the page through the same
// endpoint any HTTP client uses; the run goes on as with any answer.

import { fill, h } from "./dom.js";
import { body } from "./describe.js";

const DECISIONS = [
  ["accept", "Accept"],
  ["acceptForSession", "Accept for session"],
  ["decline", "Decline"],
  ["cancel", "Cancel"],
];

/** What each kind of request takes as an answer, per button. */
function answers(method) {
  if (method === "item/commandExecution/requestApproval" || method === "item/fileChange/requestApproval") {
    return DECISIONS.map(([decision, text]) => [text, decision, { decision }]);
  }
  if (method === "mcpServer/elicitation/request") {
    return [
      ["Accept", "accept", { action: "accept" }],
      ["Accept for session", "acceptForSession", { action: "accept", _meta: { persist: "session" } }],
      ["Decline", "decline", { action: "decline" }],
      ["Cancel", "cancel", { action: "cancel" }],
    ];
  }
  return [];
}

export class Approvals {
  constructor(model) {
    this.model = model;
    this.el = h("section", { class: "approvals", hidden: true, dataset: { testid: "approvals" }, "aria-live": "polite" });
    // Answers on their way: their cards stay disabled when redrawn.
    this.sending = new Set();
  }

  update(kind) {
    if (kind !== "requests" && kind !== "structure") return;
    if (kind === "structure" && this.model.requests.size === 0) return;
    const requests = [...this.model.requests.values()];
    this.el.hidden = requests.length === 0;
    fill(this.el, requests.length ? h("h3", {}, `Waiting for you (${requests.length})`) : null, requests.map((r) => this.card(r)));
  }

  card(request) {
    const p = request.params ?? {};
    const item = p.itemId ? this.model.byId.get(p.itemId)?.item : undefined;
    const id = String(request.id);
    const said = this.sending.has(id) ? "sending…" : this.failed?.id === id ? this.failed.message : "";
    const status = h("span", { class: "meta answer-status" }, said);
    const buttons = answers(request.method).map(([text, key, answer]) =>
      h(
        "button",
        {
          class: `answer ${key}`,
          dataset: { decision: key },
          disabled: this.sending.has(String(request.id)),
          onclick: async () => {
            const id = String(request.id);
            this.sending.add(id);
            this.update("requests");
            try {
              await this.model.answer(request.id, answer);
            } catch (error) {
              this.failed = { id, message: error.message };
            } finally {
              this.sending.delete(id);
              this.update("requests");
            }
          },
        },
        text,
      ),
    );
    let about = null;
    if (request.method === "item/commandExecution/requestApproval") {
      about = h("pre", { class: "mono command" }, `$ ${p.command ?? item?.command ?? "?"}`, p.cwd ? `\n(in ${p.cwd})` : "");
    } else if (item) {
      about = body(item);
    } else if (request.method === "mcpServer/elicitation/request") {
      about = h("p", {}, `${p.serverName ?? "MCP server"}: ${p.message ?? ""}`);
    } else {
      about = h("pre", { class: "json" }, JSON.stringify(p, null, 2));
    }
    return h(
      "article",
      { class: "request", dataset: { request: String(request.id), method: request.method } },
      h("div", { class: "request-title" }, request.method),
      p.reason ? h("p", { class: "reason" }, p.reason) : null,
      about,
      h("div", { class: "buttons" }, buttons, status),
    );
  }
}
