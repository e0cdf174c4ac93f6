// The console's shell: where the API is, whose key, which pane.

import { Api, describe } from "./api.js";
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

async function connect(event) {
  if (event) event.preventDefault();
  const url = $("#base-url").value.trim() || location.origin;
  const key = $("#api-key").value;
  sessionStorage.setItem(KEY, key);
  sessionStorage.setItem(URL_KEY, url);
  const api = new Api(url, key);
  const box = $("#whoami");
  clear(box, h("span", { class: "muted" }, "connecting…"));
  try {
    ctx.me = await whoami(api);
  } catch (err) {
    ctx.api = null;
    document.body.classList.remove("connected");
    clear(box, h("span", { class: "error", role: "alert" }, describe(err)));
    return;
  }
  ctx.api = api;
  document.body.classList.add("connected");
  showWho(ctx.me);
  for (const pane of Object.values(ctx.panes)) pane.connected();
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
  for (const [name, module] of Object.entries(PANES)) {
    ctx.panes[name] = module.mount($(`section[data-pane=${name}]`));
  }
  const wanted = location.hash.slice(1);
  select(PANES[wanted] ? wanted : "tree");
  connect(); // a server without keys needs none; one with keys says what it wants
}

start();
