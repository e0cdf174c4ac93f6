// A user's page: their sessions with messages, their memories by category (with forget), and the
// context cairn prefetched for the newest message.

import { ctx, route } from "./state.js";
import { UNAVAILABLE, describe, may } from "./api.js";
import { $, clear, fmt, h, notice, shortUri } from "./dom.js";

export function mount(section) {
  clear(section,
    h("form", { id: "user-form", class: "bar" },
      h("label", {}, "user ", h("input", { id: "u-name", type: "text", required: true, placeholder: "end user id" })),
      h("button", { type: "submit" }, "Open")),
    h("div", { class: "split" },
      h("div", {}, h("h3", {}, "sessions"), h("div", { id: "u-sessions" }),
        h("h3", {}, "prefetched context of the newest message"), h("div", { id: "u-prefetched" })),
      h("div", {}, h("h3", {}, "memories"), h("div", { id: "u-memories" }))));
  $("#user-form", section).addEventListener("submit", (e) => {
    e.preventDefault();
    open($("#u-name").value.trim());
  });
  return { connected, restore };
}

const PAGE = 50; // sessions or memories per request; "more" asks for the next page

/** The view an address names: #user?user=ann. */
function restore(params) {
  const name = $("#u-name");
  if (params.get("user") && !name.readOnly) name.value = params.get("user");
  open(name.value.trim());
}

function connected() {
  const name = $("#u-name");
  name.value = ctx.me.user || name.value;
  name.readOnly = Boolean(ctx.me.user);
  for (const id of ["#u-sessions", "#u-memories", "#u-prefetched"]) clear($(id));
  if (name.value) open(name.value);
}

function open(user) {
  if (!user) return;
  route("user", { user });
  sessions(user);
  memories(user);
}

function unavailableOr(err, what) {
  return err.unavailable ? notice("unavailable", `${what}: ${UNAVAILABLE}`) : notice("error", describe(err));
}

/** GET /v1/users/{user}/{what}, its first page: {items, page}, or null once the box says why there is none. */
async function userList(box, user, what) {
  clear(box, h("p", { class: "muted" }, "loading…"));
  try {
    const page = await ctx.api.get(`/v1/users/${encodeURIComponent(user)}/${what}`, { limit: PAGE });
    return { items: page[what] || [], page };
  } catch (err) {
    clear(box, unavailableOr(err, `a user's ${what} (GET /v1/users/{user}/${what})`));
    return null;
  }
}

/** A "more" button under a list cut at a page: it loads the next page and hands its items to ``add``. */
function moreButton(user, what, page, add) {
  if (page.next_offset === null || page.next_offset === undefined) return null;
  const shown = page.next_offset;
  const button = h("button", { type: "button", class: "more", "data-next": shown },
    `more (${shown} of ${page.total ?? "?"} shown)`);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const next = await ctx.api.get(`/v1/users/${encodeURIComponent(user)}/${what}`, { limit: PAGE, offset: shown });
      add(next[what] || [], next);
    } catch (err) {
      button.replaceWith(notice("error", describe(err)));
    }
  });
  return button;
}

function when(epoch) {
  return epoch ? new Date(epoch * 1000).toISOString().replace("T", " ").slice(0, 19) : "";
}

async function sessions(user) {
  const box = $("#u-sessions");
  const pre = $("#u-prefetched");
  clear(pre);
  const found = await userList(box, user, "sessions");
  if (!found) return;
  if (!found.items.length) {
    clear(box, notice("info", `no sessions for ${user}`));
    return;
  }
  const list = h("ul", { class: "sessions" });
  const add = (items, page) => {
    list.append(...items.map(sessionItem)); // the API answers newest first, page after page
    const old = box.querySelector(":scope > .more");
    if (old) old.remove();
    const more = moreButton(user, "sessions", page, add);
    if (more) box.append(more);
  };
  clear(box, list);
  add(found.items, found.page);
  messages(found.items[0], list.querySelector("li.session"), true);
}

function sessionItem(sn) {
  const item = h("li", { class: "session", "data-id": sn.id },
    h("button", { type: "button", class: "link" }, `${sn.id.slice(0, 8)} · ${sn.last_seq} message${sn.last_seq === 1 ? "" : "s"} · ${when(sn.updated_at)}`),
    sn.summary ? h("p", { class: "abstract" }, sn.summary) : null);
  item.querySelector("button").addEventListener("click", () => messages(sn, item));
  return item;
}

async function messages(sn, item, withPrefetched = false) {
  const old = item.querySelector(".messages, .notice");
  if (old) return old.remove();
  try {
    const view = await ctx.api.get(`/v1/sessions/${encodeURIComponent(sn.id)}`, { recent: 50 });
    item.append(h("ol", { class: "messages" }, (view.recent || []).map((m) => h("li", { class: `message ${m.role}` },
      h("span", { class: "role" }, m.name ? `${m.role} (${m.name})` : m.role), " ", m.content))));
    if (withPrefetched) clear($("#u-prefetched"), prefetched(view));
  } catch (err) {
    item.append(notice("error", describe(err)));
  }
}

function prefetched(view) {
  const p = view.prefetched;
  if (!p) return notice("info", "nothing prefetched yet: cairn prefetches when a search runs with this session");
  const all = [...(p.memories || []), ...(p.resources || []), ...(p.skills || [])].sort((a, b) => b.score - a.score);
  return h("ol", { class: "results prefetched" }, all.map((m) => h("li", { class: "result", "data-uri": m.uri },
    h("span", { class: "score" }, fmt(m.score)), " ", h("code", {}, shortUri(m.uri)), h("p", { class: "abstract" }, m.abstract))));
}

async function memories(user) {
  const box = $("#u-memories");
  const found = await userList(box, user, "memories");
  if (!found) return;
  if (!found.items.length) return clear(box, notice("info", `no memories of ${user}`));
  const loaded = [];
  const add = (items, page) => {
    loaded.push(...items);
    const byCategory = new Map();
    for (const m of loaded) {
      if (!byCategory.has(m.category)) byCategory.set(m.category, []);
      byCategory.get(m.category).push(m);
    }
    clear(box, [...byCategory.entries()].sort().map(([category, list]) => h("section", { class: "category", "data-category": category },
      h("h4", {}, `${category} (${list.length})`),
      h("ul", {}, list.map(memoryItem)))), moreButton(user, "memories", page, add));
  };
  add(found.items, found.page);
}

function memoryItem(m) {
  const forget = may(ctx.me, "forget")
    ? h("button", { type: "button", class: "danger", "aria-label": `forget ${m.uri}` }, "forget")
    : h("span", { class: "muted" }, `(role ${ctx.me.role} may not forget)`);
  const item = h("li", { class: "memory", "data-uri": m.uri },
    h("strong", {}, m.title || shortUri(m.uri).split("/").pop()), " ", forget,
    h("p", { class: "abstract" }, m.text), h("p", { class: "uri" }, h("code", {}, m.uri), ` · ${when(m.updated_at)}`));
  if (forget.tagName === "BUTTON") forget.addEventListener("click", async () => {
    if (!confirm(`Forget ${m.uri}? cairn deletes it.`)) return;
    try {
      const done = await ctx.api.delete("/v1/memories", { uri: m.uri });
      item.replaceWith(h("li", { class: "memory forgotten" }, `forgotten: ${m.uri} (${done.removed} records removed)`));
    } catch (err) {
      item.append(err.unavailable ? notice("unavailable", `forget: ${UNAVAILABLE}`) : notice("error", describe(err)));
    }
  });
  return item;
}
