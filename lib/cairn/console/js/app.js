// The console's shell: where the API is, whose key, which pane.

import { Api, Disconnected, describe } from "./api.js";
import { $, clear, h } from "./dom.js";
import { ctx } from "./state.js";
import * as tree from "./tree.js";
import * as query from "./query.js";
import * as user from "./user.js";
import * as ingest from "./ingest.js";
import * as stats from "./stats.js";

const PANES = { tree, query, user, ingest, stats };
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
  for (const pane of Object.values(ctx.panes)) pane.connected();
}

/** Before another key is shown (or a wrong one refused): nothing the previous key loaded stays on
screen, and what it still had in flight is dropped. Every pane is mounted afresh. */
function forget() {
  ctx.api.retire();
  ctx.api = new Disconnected();
  ctx.me = null;
  document.body.classList.remove("connected");
  mountPanes();
}

function mountPanes() {
  for (const [name, module] of Object.entries(PANES)) {
    ctx.panes[name] = module.mount($(`section[data-pane=${name}]`));
  }
}

function select(name) {
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.pane === name));
  }
  for (const section of document.querySelectorAll("section.pane")) {
    section.hidden = section.dataset.pane !== name;
  }
  history.replaceState(null, "", `#${name}`);
}

function start() {
  $("#base-url").value = sessionStorage.getItem(URL_KEY) || location.origin;
  $("#api-key").value = sessionStorage.getItem(KEY) || "";
  $("#connect").addEventListener("submit", connect);
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.addEventListener("click", () => select(tab.dataset.pane));
  }
  const wanted = location.hash.slice(1);
  select(PANES[wanted] ? wanted : "tree");
  connect(); // mounts the panes; a server without keys needs none, one with keys says what it wants
}

start();
