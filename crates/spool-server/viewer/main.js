// The trace viewer's frame: the thread list, the open thread with its tabs
// (timeline, provenance tree, the three views, the event log), the item
// panel, pending approvals, the theme, and the keys.
//
// The address says what is open: `#thread=ID` (and, once, `#token=…`,
// which is moved to sessionStorage and dropped from the address so it is
// neither kept in history nor shown).

import { ApiError, api, setToken } from "./api.js";
import { fill, h, short } from "./dom.js";
import { ThreadModel } from "./thread.js";
import { ThreadList, statusName } from "./threads.js";
import { Timeline } from "./timeline.js";
import { ProvenanceTree } from "./tree.js";
import { Views } from "./views.js";
import { EventLog } from "./log.js";
import { Detail } from "./detail.js";
import { Approvals } from "./approvals.js";

const TABS = ["timeline", "tree", "views", "log"];

function hashParams() {
  return new URLSearchParams(location.hash.slice(1));
}

function takeToken() {
  const params = hashParams();
  if (!params.has("token")) return;
  setToken(params.get("token"));
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", `${location.pathname}${location.search}${rest ? `#${rest}` : ""}`);
}

function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  localStorage.setItem("spool.theme", theme);
}

const root = document.getElementById("app");
const status = h("span", { class: "stream-state", dataset: { testid: "stream-state" } }, "");
const message = h("div", { class: "message-bar", hidden: true, role: "status" });
const main = h("main", { class: "main" }, h("p", { class: "placeholder" }, "Pick a thread."));
let current = null;

function say(text, kind = "error") {
  message.hidden = !text;
  message.className = `message-bar ${kind}`;
  fill(message, text ?? "");
}

function showError(error) {
  if (error instanceof ApiError && error.status === 401) askToken();
  else say(error.message);
}

/** The server wants a token this tab does not have. */
function askToken() {
  const input = h("input", { type: "password", placeholder: "bearer token", "aria-label": "bearer token", autocomplete: "off" });
  const form = h(
    "form",
    {
      class: "token-form",
      onsubmit: (e) => {
        e.preventDefault();
        setToken(input.value);
        say(null);
        threads.load(false);
        route();
      },
    },
    h("p", {}, "This server needs its bearer token (spool serve --auth-token-file)."),
    input,
    h("button", { type: "submit" }, "Use token"),
  );
  fill(main, form);
  input.focus();
}

const threads = new ThreadList({
  onOpen: (id) => {
    location.hash = `thread=${encodeURIComponent(id)}`;
  },
  onError: showError,
});

function themeButton() {
  return h(
    "button",
    {
      class: "small theme",
      title: "Light or dark (t)",
      onclick: () => applyTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark"),
    },
    "◐ theme",
  );
}

fill(
  root,
  h("header", { class: "top" }, h("a", { class: "brand", href: "#" }, "spool trace"), status, h("span", { class: "spacer" }), themeButton()),
  message,
  h("div", { class: "body" }, threads.el, main),
);

/** Opens a thread: its header, approvals, tabs and item panel. */
async function openThread(threadId) {
  if (current?.model.id === threadId) return;
  if (current) current.model.close();
  performance.clearMarks("spool:thread-shown");
  performance.clearMarks("spool:thread-loaded");
  delete document.body.dataset.threadShown;
  delete document.body.dataset.threadLoaded;
  threads.select(threadId);
  const model = new ThreadModel(threadId);
  const detail = new Detail(model, {});
  const select = (record) => detail.show(record);
  const parts = {
    timeline: new Timeline(model, { onSelect: select, onFork: (t) => fork(model, t), onRevert: (t, n) => revert(model, t, n) }),
    tree: new ProvenanceTree(model, { onSelect: select }),
    views: new Views(model, { onSelect: select }),
    log: new EventLog(model),
  };
  const approvals = new Approvals(model);
  const title = h("h2", { class: "thread-title" }, "…");
  const facts = h("div", { class: "meta thread-facts" });
  const tabBar = h(
    "div",
    { class: "tabs", role: "tablist" },
    TABS.map((tab, i) => h("button", { role: "tab", class: `tab tab-${tab}`, dataset: { tab }, title: `${tab} (${i + 1})`, onclick: () => show(tab) }, tab)),
  );
  const panel = h("div", { class: "panel" });
  const show = (tab) => {
    current.tab = tab;
    for (const b of tabBar.children) b.setAttribute("aria-selected", String(b.dataset.tab === tab));
    fill(panel, parts[tab].el);
    if (tab === "views") parts.views.shown();
    if (tab === "log") parts.log.shownNow();
    parts[tab].update?.("structure");
  };
  current = { model, parts, show, detail, tab: "timeline" };
  fill(main, h("div", { class: "thread-head" }, title, facts), approvals.el, tabBar, h("div", { class: "work" }, panel, detail.el));
  show("timeline");
  model.on((kind, detailArg) => {
    if (kind === "thread") {
      const t = model.thread ?? {};
      title.textContent = short(t.name || t.preview || threadId, 120);
      facts.textContent = `${threadId} · ${statusName(t.status)} · ${t.model ?? t.modelProvider ?? ""} · history ${t.historyMode ?? ""}`;
      return;
    }
    if (kind === "stream") {
      status.textContent = model.streamState;
      status.dataset.state = model.streamState;
      return;
    }
    if (kind === "error") return showError(detailArg);
    if (kind === "structure" && model.loaded && document.body.dataset.threadLoaded !== threadId) {
      performance.mark("spool:thread-loaded");
      document.body.dataset.threadLoaded = threadId;
    }
    if (kind === "reset") {
      current = null;
      openThread(threadId);
      return;
    }
    const visible = parts[current?.tab];
    if (visible) visible.update(kind, detailArg);
    if (kind === "event" && current?.tab !== "log") parts.log.update(kind, detailArg);
    if (kind !== "event") {
      if (current?.tab !== "views") parts.views.update(kind);
      approvals.update(kind);
      detail.update(kind, detailArg);
    }
  });
  try {
    await model.open();
    // Marked once the first rows are drawn: the rows are built on the next
    // frame and drawn on the one after (ten frames at most).
    const list = parts.timeline.list;
    for (let frame = 0; frame < 10 && list.rows.length === 0 && model.items.length > 0; frame++) {
      await new Promise((resolve) => requestAnimationFrame(resolve));
    }
    for (let frame = 0; frame < 10 && list.layer.childElementCount === 0 && list.rows.length > 0; frame++) {
      await new Promise((resolve) => requestAnimationFrame(resolve));
    }
    performance.mark("spool:thread-shown");
    document.body.dataset.threadShown = threadId;
  } catch (error) {
    showError(error);
  }
}

async function fork(model, turnId) {
  try {
    const reply = await api(`/v1/threads/${encodeURIComponent(model.id)}/fork`, { method: "POST", body: { lastTurnId: turnId } });
    threads.load(false);
    location.hash = `thread=${encodeURIComponent(reply.thread.id)}`;
    say(`Forked into a new thread.`, "info");
  } catch (error) {
    showError(error);
  }
}

async function revert(model, turnId, n) {
  if (!confirm(`Revert: drop turn ${n} and every turn after it from this thread?`)) return;
  try {
    await api(`/v1/threads/${encodeURIComponent(model.id)}/revert`, { method: "POST", body: { beforeTurnId: turnId } });
    current = null;
    model.close();
    openThread(model.id);
  } catch (error) {
    showError(error);
  }
}

function route() {
  takeToken();
  const threadId = hashParams().get("thread");
  if (threadId) openThread(threadId);
}

document.addEventListener("keydown", (e) => {
  const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement || e.target instanceof HTMLSelectElement;
  if (e.key === "Escape") {
    current?.detail.hide();
    return;
  }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "/") {
    e.preventDefault();
    threads.search.focus();
  } else if (e.key === "t") {
    applyTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark");
  } else if (current && ["1", "2", "3", "4"].includes(e.key)) {
    current.show(TABS[Number(e.key) - 1]);
  } else if (current && (e.key === "j" || e.key === "k" || e.key === "ArrowDown" || e.key === "ArrowUp")) {
    const list = current.parts.timeline.list.el;
    if (current.tab === "timeline" && document.activeElement !== list) {
      list.focus();
      current.parts.timeline.key({ target: list, key: e.key, preventDefault: () => e.preventDefault() });
    }
  }
});

applyTheme(localStorage.getItem("spool.theme") ?? (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"));
window.addEventListener("hashchange", route);
takeToken();
threads.load(false);
route();
