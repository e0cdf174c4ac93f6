// What every pane shares: the API client of the connected key, who that key is (GET /v1/me), and
// the page's address, which names the view shown (#query?op=search&q=..., #tree?uri=...).

import { Disconnected } from "./api.js";

// ``api`` is never null: with no key connected it is a ``Disconnected`` client, whose calls fail with a sentence
export const ctx = { api: new Disconnected(), me: null, panes: {} };

/** The view the address names: {pane, params}, or null. */
export function routed() {
  const raw = location.hash.slice(1);
  if (!raw) return null;
  const at = raw.indexOf("?");
  const pane = at < 0 ? raw : raw.slice(0, at);
  return { pane, params: new URLSearchParams(at < 0 ? "" : raw.slice(at + 1)) };
}

/** Name the view in the address (replacing it: the back button is not a view history); a pane not
 * shown (one loading in the background) leaves the address alone. */
export function route(pane, params = {}) {
  const shown = document.querySelector("[role=tab][aria-selected=true]");
  if (shown && shown.dataset.pane !== pane) return;
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const text = query.toString();
  history.replaceState(null, "", `#${pane}${text ? "?" + text : ""}`);
}

/** Ask the shell to show ``pane`` with ``params`` (as if the address named them). */
export function open(pane, params) {
  document.dispatchEvent(new CustomEvent("cairn:open", { detail: { pane, params: new URLSearchParams(params) } }));
}
