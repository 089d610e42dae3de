// One open thread as the page knows it: its turns, its items (records in
// ordinal order), its pending requests, kept current by the thread's event
// stream.
//
// How the snapshot and the stream meet without a gap or a double: the
// thread's last seq is read first; every page read after it reflects at
// least that seq; the stream starts after it. An event for an item whose
// record already reflects it (record.seq >= event seq: the record is the
// item as of its last changing event) is skipped, so a delta is never
// applied twice, and items the stream starts before their page arrives are
// merged by id.

import { api, follow, query } from "./api.js";

const PAGE = 500;

/** The coarse family of an item kind, for colour and filtering. */
export function family(kind) {
  switch (kind) {
    case "agentMessage":
    case "reasoning":
    case "plan":
      return "model";
    case "commandExecution":
    case "fileChange":
    case "mcpToolCall":
    case "dynamicToolCall":
    case "functionCall":
    case "webSearch":
    case "imageView":
      return "tool";
    case "userMessage":
      return "user";
    case "handoff":
      return "handoff";
    case "error":
    case "stepError":
      return "error";
    default:
      return "other";
  }
}

export class ThreadModel {
  constructor(threadId) {
    this.id = threadId;
    this.thread = null;
    this.items = [];
    this.byId = new Map();
    this.turns = new Map();
    this.turnOrder = [];
    this.requests = new Map();
    this.liveEvents = [];
    this.deltaCounts = new Map();
    this.lastSeq = 0;
    this.loaded = false;
    this.streamState = "connecting";
    this.listeners = new Set();
    this.stop = null;
    this.closed = false;
  }

  /** `fn(kind)`: "structure" (items or turns came or went), "content"
   * (an item's text grew), "requests", "thread", "stream", "event". */
  on(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(kind, detail) {
    for (const fn of this.listeners) fn(kind, detail);
  }

  /** Reads the thread and starts following it. Resolves once the first
   * page of items is in (the rest keeps arriving in the background). */
  async open() {
    const head = await api(`/v1/threads/${encodeURIComponent(this.id)}/log${query({ after: 0, limit: 1 })}`);
    this.lastSeq = head.lastSeq ?? 0;
    const [thread] = await Promise.all([this.readThread(), this.readTurns()]);
    this.thread = thread;
    this.emit("thread");
    const first = await this.readItems(0);
    this.stop = follow(this.id, this.lastSeq, {
      onEvent: (message, seq) => this.apply(message, seq),
      onState: (state) => {
        this.streamState = state;
        this.emit("stream");
      },
    });
    this.readRest(first);
  }

  close() {
    this.closed = true;
    if (this.stop) this.stop();
    this.listeners.clear();
  }

  async readThread() {
    const reply = await api(`/v1/threads/${encodeURIComponent(this.id)}${query({ includeTurns: false })}`);
    return reply.thread;
  }

  async readTurns() {
    let cursor;
    do {
      const page = await api(
        `/v1/threads/${encodeURIComponent(this.id)}/turns${query({
          sortDirection: "asc",
          limit: 500,
          itemsView: "notLoaded",
          cursor,
        })}`,
      );
      for (const turn of page.data) this.putTurn(turn);
      cursor = page.nextCursor;
    } while (cursor && !this.closed);
  }

  async readItems(after) {
    const page = await api(
      `/v1/threads/${encodeURIComponent(this.id)}/items${query({ view: "all", after, limit: PAGE })}`,
    );
    for (const record of page.data) this.putRecord(record);
    this.emit("structure");
    return page.nextCursor;
  }

  async readRest(cursor) {
    try {
      while (cursor !== null && cursor !== undefined && !this.closed) {
        cursor = await this.readItems(cursor);
      }
      this.loaded = true;
      this.emit("structure");
    } catch (error) {
      this.emit("error", error);
    }
  }

  putTurn(turn) {
    if (!this.turns.has(turn.id)) this.turnOrder.push(turn.id);
    const known = this.turns.get(turn.id);
    this.turns.set(turn.id, { ...known, ...turn });
  }

  /** Adds or updates a record, keeping the newest state and ordinal order. */
  putRecord(record) {
    const id = record.item.id;
    const known = this.byId.get(id);
    if (known) {
      if (record.seq >= known.seq) Object.assign(known, record);
      return;
    }
    this.byId.set(id, record);
    if (!this.turns.has(record.turnId)) {
      this.turnOrder.push(record.turnId);
      this.turns.set(record.turnId, { id: record.turnId, status: "unknown" });
    }
    const items = this.items;
    if (!items.length || items[items.length - 1].ordinal < record.ordinal) {
      items.push(record);
      return;
    }
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (items[mid].ordinal < record.ordinal) lo = mid + 1;
      else hi = mid;
    }
    items.splice(lo, 0, record);
  }

  /** One message of the stream: a notification (with its seq) or a
   * server request (no seq). */
  apply(message, seq) {
    const params = message.params || {};
    if (message.id !== undefined && message.method) {
      this.requests.set(String(message.id), message);
      this.emit("requests");
      return;
    }
    if (seq !== undefined) this.lastSeq = Math.max(this.lastSeq, seq);
    this.liveEvents.push(message);
    this.emit("event", message);
    switch (message.method) {
      case "item/started":
      case "item/completed": {
        const known = this.byId.get(params.item.id);
        if (known && seq !== undefined && known.seq >= seq) return;
        const record = {
          threadId: params.threadId,
          turnId: params.turnId,
          ordinal: known ? known.ordinal : seq ?? this.lastSeq,
          seq: seq ?? known?.seq ?? 0,
          item: params.item,
          envelope: params.envelope ?? known?.envelope,
          tokenCount: known?.tokenCount,
        };
        this.putRecord(record);
        this.emit("structure");
        return;
      }
      case "item/agentMessage/delta":
      case "item/plan/delta":
        return this.grow(params, seq, (item) => {
          item.text = (item.text ?? "") + params.delta;
        });
      case "item/commandExecution/outputDelta":
        return this.grow(params, seq, (item) => {
          item.aggregatedOutput = (item.aggregatedOutput ?? "") + params.delta;
        });
      case "item/reasoning/summaryTextDelta":
        return this.grow(params, seq, (item) => {
          item.summary = item.summary ?? [];
          const i = params.summaryIndex ?? 0;
          item.summary[i] = (item.summary[i] ?? "") + params.delta;
        });
      case "item/reasoning/textDelta":
        return this.grow(params, seq, (item) => {
          item.content = item.content ?? [];
          const i = params.contentIndex ?? 0;
          item.content[i] = (item.content[i] ?? "") + params.delta;
        });
      case "turn/started":
      case "turn/completed":
        this.putTurn(params.turn);
        this.emit("structure");
        return;
      case "serverRequest/resolved":
        this.requests.delete(String(params.requestId));
        this.emit("requests");
        return;
      case "thread/status/changed":
        if (this.thread) this.thread.status = params.status;
        this.emit("thread");
        return;
      case "thread/name/updated":
        if (this.thread) this.thread.name = params.threadName ?? params.name ?? this.thread.name;
        this.emit("thread");
        return;
      case "item/removed": {
        const record = this.byId.get(params.itemId);
        if (record) {
          this.byId.delete(params.itemId);
          this.items.splice(this.items.indexOf(record), 1);
          this.emit("structure");
        }
        return;
      }
      case "thread/reverted":
      case "thread/cleared":
        this.emit("reset");
        return;
      default:
    }
  }

  grow(params, seq, change) {
    const record = this.byId.get(params.itemId);
    if (!record) return;
    if (seq !== undefined) {
      if (record.seq >= seq) return;
      record.seq = seq;
    }
    change(record.item);
    this.deltaCounts.set(params.itemId, (this.deltaCounts.get(params.itemId) ?? 0) + 1);
    this.emit("content", params.itemId);
  }

  /** Rows for the timeline: each turn's header, then its items. */
  rows() {
    const byTurn = new Map();
    for (const record of this.items) {
      let list = byTurn.get(record.turnId);
      if (!list) byTurn.set(record.turnId, (list = []));
      list.push(record);
    }
    const rows = [];
    for (const turnId of this.turnOrder) {
      const records = byTurn.get(turnId) ?? [];
      const turn = this.turns.get(turnId);
      rows.push({ type: "turn", turn, records });
      for (const record of records) rows.push({ type: "item", record, turn, siblings: records });
    }
    return rows;
  }

  /** The events that made an item, in order: read from the log between
   * its start and its last change. */
  async itemEvents(record) {
    const events = [];
    let after = record.ordinal - 1;
    while (after < record.seq) {
      const page = await api(
        `/v1/threads/${encodeURIComponent(this.id)}/log${query({ after, limit: 2000 })}`,
      );
      for (const message of page.data) {
        const p = message.params || {};
        if (p.seq > record.seq) return events;
        if (p.itemId === record.item.id || p.item?.id === record.item.id) events.push(message);
      }
      if (page.nextCursor === null || page.nextCursor === undefined) break;
      after = page.nextCursor;
    }
    return events;
  }

  /** Answers a pending request the way any client does. */
  async answer(requestId, answer) {
    await api(
      `/v1/threads/${encodeURIComponent(this.id)}/requests/${encodeURIComponent(requestId)}`,
      { method: "POST", body: answer },
    );
    this.requests.delete(String(requestId));
    this.emit("requests");
  }
}
