// Building the page. Everything a thread holds (model output, command
// output, tool arguments) is text from outside: it only ever reaches the
// page as text nodes (`textContent`), never as markup, so a model cannot
// put a script on the page that would then drive the API with the user's
// token.

/** An element: `h("div", {class: "row", onclick: f}, child, "text", …)`. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "style") el.style.cssText = value;
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces every child of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** "3.2 s", "140 ms", "—". */
export function duration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** A Unix time in seconds as local date and time. */
export function when(seconds) {
  if (!seconds) return "—";
  return new Date(seconds * 1000).toLocaleString();
}

/** A number with thousands separators. */
export function count(n) {
  return n === undefined || n === null ? "—" : Number(n).toLocaleString();
}

/** Text cut to `max` characters, on one line. */
export function short(text, max = 120) {
  const line = String(text ?? "").replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** Calls `fn` once per animation frame at most, with the latest arguments. */
export function throttled(fn) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      fn();
    });
  };
}
