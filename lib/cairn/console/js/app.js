// The console's shell: where the API is, whose key, which pane, and the address that reopens a view.

import { Api, Disconnected, describe, may } from "./api.js";
import { $, clear, h } from "./dom.js";
import { ctx, route, routed } from "./state.js";
import * as tree from "./tree.js";
import * as query from "./query.js";
import * as user from "./user.js";
import * as ingest from "./ingest.js";
import * as stats from "./stats.js";
import * as overview from "./overview.js";

const PANES = { tree, query, user, ingest, stats, overview };
// what a pane needs the key to be allowed (GET /v1/me's "can"): a pane the key may not use is not offered
const NEEDS = {
  tree: ["tree"], query: ["find", "search", "context"], user: ["memories", "sessions"], ingest: ["put_documents"],
  stats: ["stats"], overview: ["overview"],
};
const KEY = "cairn.console.key";
const URL_KEY = "cairn.console.url";

/** Who the key is: GET /v1/me where the server has it; else only that the key opens the API. */
async function whoami(api) {
  try {
    return { ...(await api.get("/v1/me")), known: true };
  } catch (err) {
    if (!err.unavailable) throw err;
  }
  await api.get("/v1/stats"); // proves the key (401 otherwise)
  return { tenant: null, user: null, role: null, can: null, known: false };
}

function showWho(me) {
  const box = $("#whoami");
  if (!me.known) {
    clear(box, h("span", { class: "who" }, "connected"),
      h("span", { class: "muted" }, " — this server has no GET /v1/me: tenant, user and role not shown"));
    return;
  }
  clear(box,
    h("span", { class: "who", "data-tenant": me.tenant }, `tenant ${me.tenant}`),
    me.user ? h("span", { class: "who", "data-user": me.user }, ` · user ${me.user}`) : h("span", { class: "muted" }, " · any user"),
    me.role ? h("span", { class: "who" }, ` · role ${me.role}`) : null);
}

let attempts = 0; // a Connect pressed again while the first still waits: only the last one counts
// the view the address named when the page was opened (a link someone shared): reopened by the
// first key that connects, then forgotten (a key connected later never opens the last one's view)
let pending = null;

async function connect(event) {
  if (event) event.preventDefault();
  const attempt = ++attempts;
  const url = $("#base-url").value.trim() || location.origin;
  const key = $("#api-key").value;
  sessionStorage.setItem(KEY, key);
  sessionStorage.setItem(URL_KEY, url);
  const api = new Api(url, key);
  const box = $("#whoami");
  forget();
  clear(box, h("span", { class: "muted" }, "connecting…"));
  try {
    const me = await whoami(api);
    if (attempt !== attempts) return api.retire();
    ctx.me = me;
  } catch (err) {
    if (attempt !== attempts) return api.retire();
    clear(box, h("span", { class: "error", role: "alert" }, describe(err)));
    return;
  }
  ctx.api = api;
  document.body.classList.add("connected");
  showWho(ctx.me);
  offer(ctx.me);
  for (const pane of Object.values(ctx.panes)) pane.connected();
  const reopen = pending;
  pending = null;
  if (reopen && isOffered(reopen.pane)) {
    select(reopen.pane, false);
    if (ctx.panes[reopen.pane].restore) ctx.panes[reopen.pane].restore(reopen.params);
  }
}

/** Before another key is shown (or a wrong one refused): nothing the previous key loaded stays on
screen, and what it still had in flight is dropped. Every pane is mounted afresh. */
function forget() {
  ctx.api.retire();
  ctx.api = new Disconnected();
  ctx.me = null;
  document.body.classList.remove("connected");
  mountPanes();
  offer(null);
  const shown = document.querySelector("[role=tab][aria-selected=true]");
  if (!pending) route(shown ? shown.dataset.pane : "tree"); // the address no longer names what the old key opened
}

function mountPanes() {
  for (const [name, module] of Object.entries(PANES)) {
    ctx.panes[name] = module.mount($(`section[data-pane=${name}]`));
  }
}

function tabs() {
  return [...document.querySelectorAll("[role=tab]")];
}

function isOffered(name) {
  const tab = tabs().find((t) => t.dataset.pane === name);
  return Boolean(tab && !tab.hidden);
}

/** Only the panes the key may use are offered (none are hidden before a key is known). */
function offer(me) {
  for (const tab of tabs()) {
    tab.hidden = Boolean(me) && !NEEDS[tab.dataset.pane].some((op) => may(me, op));
  }
  const selected = tabs().find((t) => t.getAttribute("aria-selected") === "true");
  if (!selected || selected.hidden) select(tabs().find((t) => !t.hidden).dataset.pane);
}

function select(name, focus = false) {
  for (const tab of tabs()) {
    const on = tab.dataset.pane === name;
    tab.setAttribute("aria-selected", String(on));
    tab.tabIndex = on ? 0 : -1;
    if (on && focus) tab.focus();
  }
  for (const section of document.querySelectorAll("section.pane")) {
    section.hidden = section.dataset.pane !== name;
  }
  const current = routed();
  if (!current || current.pane !== name) route(name);
}

/** The WAI-ARIA tabs pattern: arrows move to the previous or next tab (wrapping), Home and End to the ends. */
function onTabKey(event) {
  const shown = tabs().filter((t) => !t.hidden);
  const at = shown.indexOf(event.currentTarget);
  const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: shown.length - 1 }[event.key];
  if (to === undefined) return;
  event.preventDefault();
  select(shown[(to + shown.length) % shown.length].dataset.pane, true);
}

/** Another pane asks for a view of its own (a result opens its document in the tree). */
function onOpen(event) {
  const { pane, params } = event.detail;
  if (!isOffered(pane)) return;
  select(pane);
  ctx.panes[pane].restore(params);
}

function start() {
  $("#base-url").value = sessionStorage.getItem(URL_KEY) || location.origin;
  $("#api-key").value = sessionStorage.getItem(KEY) || "";
  $("#connect").addEventListener("submit", connect);
  for (const tab of tabs()) {
    tab.addEventListener("click", () => { pending = null; select(tab.dataset.pane); });
    tab.addEventListener("keydown", onTabKey);
  }
  document.addEventListener("cairn:open", onOpen);
  const wanted = routed();
  pending = wanted && PANES[wanted.pane] ? wanted : null;
  select(pending ? wanted.pane : "tree");
  connect(); // mounts the panes; a server without keys needs none, one with keys says what it wants
}

start();
