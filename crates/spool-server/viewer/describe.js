// Items in words: a one-line label for lists, and a readable body for the
// detail panel (a command with its exit code and output, a patch file by
// file, an MCP call with its arguments and result).

import { h } from "./dom.js";

function userText(item) {
  return (item.content ?? [])
    .map((part) => part.text ?? (part.type === "image" || part.type === "localImage" ? "[image]" : ""))
    .join(" ");
}

/** One line that says what the item is. */
export function label(item) {
  switch (item.type) {
    case "userMessage":
      return userText(item);
    case "agentMessage":
    case "plan":
    case "context":
    case "status":
      return item.text ?? "";
    case "reasoning":
      return (item.summary ?? []).join(" ") || (item.content ?? []).join(" ");
    case "commandExecution": {
      const exit = item.exitCode === undefined || item.exitCode === null ? "" : ` → exit ${item.exitCode}`;
      return `$ ${item.command}${exit}`;
    }
    case "fileChange":
      return (item.changes ?? []).map((c) => `${c.kind?.type ?? c.kind ?? "change"} ${c.path}`).join(", ");
    case "mcpToolCall":
      return `${item.server}.${item.tool}(${JSON.stringify(item.arguments ?? {})})`;
    case "dynamicToolCall":
      return `${item.namespace ? `${item.namespace}.` : ""}${item.tool}(${JSON.stringify(item.arguments ?? {})})`;
    case "functionCall":
      return `${item.name}(${item.arguments ?? ""})`;
    case "handoff":
      return `${item.fromAgent} → ${item.toAgent}`;
    case "webSearch":
      return `search: ${item.query}`;
    case "imageView":
      return item.path;
    case "contextCompaction":
      return item.summary ?? "context compacted";
    case "error":
    case "stepError":
      return item.message;
    case "component":
      return item.name;
    case "container":
      return item.title ?? `${(item.children ?? []).length} children`;
    case "stateChange":
      return `${item.key} = ${JSON.stringify(item.value)}`;
    case "resourceChange":
      return `${item.change} ${item.uri}`;
    case "enteredReviewMode":
    case "exitedReviewMode":
      return item.review;
    default:
      return "";
  }
}

/** The status an item's own fields give (tool items), else the envelope's. */
export function statusOf(record) {
  const own = record.item.status;
  const s = typeof own === "string" ? own : record.envelope?.status;
  return s ?? "unknown";
}

function block(title, text, cls) {
  return h("section", { class: "block" }, h("h4", {}, title), h("pre", { class: cls ?? "" }, text ?? ""));
}

/** One file's unified diff, each line coloured by what it does. */
function diff(text) {
  const lines = String(text ?? "").split("\n");
  return h(
    "pre",
    { class: "diff" },
    lines.map((line) => {
      let cls = "";
      if (line.startsWith("+") && !line.startsWith("+++")) cls = "add";
      else if (line.startsWith("-") && !line.startsWith("---")) cls = "del";
      else if (line.startsWith("@@")) cls = "hunk";
      return h("span", { class: cls }, `${line}\n`);
    }),
  );
}

/** The item's body in a readable form. */
export function body(item) {
  switch (item.type) {
    case "commandExecution":
      return h(
        "div",
        { class: "tool-view" },
        h(
          "dl",
          { class: "facts" },
          h("dt", {}, "command"),
          h("dd", { class: "mono" }, item.command),
          h("dt", {}, "cwd"),
          h("dd", { class: "mono" }, item.cwd),
          h("dt", {}, "exit code"),
          h("dd", { class: "exit-code" }, item.exitCode ?? "—"),
          h("dt", {}, "status"),
          h("dd", {}, item.status),
        ),
        block("output", item.aggregatedOutput ?? "", "output"),
      );
    case "fileChange":
      return h(
        "div",
        { class: "tool-view" },
        (item.changes ?? []).map((change) =>
          h(
            "section",
            { class: "block file" },
            h("h4", {}, `${change.kind?.type ?? change.kind ?? ""} ${change.path}`),
            diff(change.diff),
          ),
        ),
      );
    case "mcpToolCall":
      return h(
        "div",
        { class: "tool-view" },
        h("dl", { class: "facts" }, h("dt", {}, "server"), h("dd", {}, item.server), h("dt", {}, "tool"), h("dd", {}, item.tool)),
        block("arguments", JSON.stringify(item.arguments ?? {}, null, 2)),
        item.result ? block("result", JSON.stringify(item.result, null, 2)) : null,
        item.error ? block("error", JSON.stringify(item.error, null, 2), "error") : null,
      );
    case "functionCall":
      return h(
        "div",
        { class: "tool-view" },
        block(`${item.name} arguments`, pretty(item.arguments)),
        block("output", item.output ?? ""),
      );
    case "dynamicToolCall":
      return h(
        "div",
        { class: "tool-view" },
        block("arguments", JSON.stringify(item.arguments ?? {}, null, 2)),
        block("output", JSON.stringify(item.contentItems ?? [], null, 2)),
      );
    default: {
      const text = label(item);
      return text ? block("text", text, "message") : null;
    }
  }
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text ?? "";
  }
}
