// The page's only way to the server: spool's public HTTP API, the same one
// any client uses (`docs/internals/viewer.md` lists the endpoints).
//
// The bearer token, when the server has one, comes in the address's
// fragment (`#token=…`, which the browser never sends anywhere), is kept in
// this tab's sessionStorage and sent as `Authorization: Bearer` on every
// request. That is also why event streams are read with `fetch` and not
// `EventSource`: an EventSource cannot send headers.

const TOKEN_KEY = "spool.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value.trim());
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra) {
  const all = { ...extra };
  const t = token();
  if (t) all.Authorization = `Bearer ${t}`;
  return all;
}

/** A JSON request; resolves to the parsed body, rejects with an ApiError. */
export async function api(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: headers({ Accept: "application/json" }) };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "unreachable", `the server cannot be reached (${error.message})`);
  }
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: reported below with the status.
  }
  if (!response.ok) {
    const err = json?.error;
    throw new ApiError(response.status, err?.code ?? "http", err?.message ?? `${response.status} ${text.slice(0, 200)}`);
  }
  return json;
}

/** Query string of the defined values of `params`. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

/**
 * A thread's events from `after` on, live, as Server-Sent Events. A stream
 * that breaks (the network, a server restart) is opened again with
 * `Last-Event-ID` set to the last seq received, so nothing is missed and
 * nothing comes twice. Server requests (approvals) come without an id.
 *
 * `onEvent(message, seq)` gets each parsed message; `onState(state)` gets
 * "connecting", "live", "reconnecting" or "closed". Returns a stop function.
 */
export function follow(threadId, after, { onEvent, onState }) {
  const control = new AbortController();
  let last = after;
  let wait = 250;
  let attempts = 0;
  const run = async () => {
    while (!control.signal.aborted) {
      onState(attempts++ === 0 ? "connecting" : "reconnecting");
      try {
        const response = await fetch(`/v1/threads/${encodeURIComponent(threadId)}/events`, {
          headers: headers({ Accept: "text/event-stream", "Last-Event-ID": String(last) }),
          signal: control.signal,
          cache: "no-store",
        });
        if (response.status === 401 || response.status === 404) {
          onState("closed", `${response.status}`);
          return;
        }
        if (!response.ok || !response.body) throw new Error(`status ${response.status}`);
        onState("live");
        wait = 250;
        await readEvents(response.body, (event) => {
          if (event.id !== undefined) {
            const seq = Number(event.id);
            if (seq <= last) return; // Already shown.
            last = seq;
          }
          let message;
          try {
            message = JSON.parse(event.data);
          } catch {
            return;
          }
          onEvent(message, event.id === undefined ? undefined : Number(event.id));
        });
      } catch (error) {
        if (control.signal.aborted) break;
      }
      if (control.signal.aborted) break;
      onState("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 4000);
    }
    onState("closed");
  };
  run();
  return () => control.abort();
}

/** Parses an event stream as it arrives, without rescanning what is read. */
async function readEvents(body, dispatch) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data = [];
  let name;
  let id;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let start = 0;
    for (;;) {
      const end = buffer.indexOf("\n", start);
      if (end < 0) break;
      let line = buffer.slice(start, end);
      start = end + 1;
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line === "") {
        if (data.length) dispatch({ event: name, id, data: data.join("\n") });
        data = [];
        name = undefined;
        id = undefined;
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "data") data.push(val);
      else if (field === "event") name = val;
      else if (field === "id") id = val;
    }
    buffer = buffer.slice(start);
  }
}
