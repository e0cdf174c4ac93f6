// The tenant's tree: folders with their L0 abstract, L1 overview and counts; a file's chunks
// with their citations and its full body (GET /v1/tree, GET /v1/contents). Browsing runs no search.

import { ctx, route } from "./state.js";
import { describe } from "./api.js";
import { $, clear, fmt, h, notice, shortUri } from "./dom.js";

const PAGE = 100; // items of a folder per request; "more" asks for the next page
const MAX_CHUNKS = 1000; // a file's chunks in one request (GET /v1/tree of the file)
export function mount(section) {
  clear(section,
    h("form", { id: "tree-form", class: "bar" },
      h("label", {}, "Browse ", h("select", { id: "tree-root", "aria-label": "root" })),
      h("input", { id: "tree-uri", type: "text", size: 48, placeholder: "or a URI: cairn://resources/…", "aria-label": "folder URI" }),
      h("button", { type: "submit" }, "Open")),
    h("div", { class: "split" },
      h("nav", { id: "tree-list", class: "tree", "aria-label": "tree" }),
      h("article", { id: "tree-detail", class: "detail", "aria-live": "polite" },
        notice("info", "Pick a folder or a file to read it."))));
  $("#tree-form", section).addEventListener("submit", (e) => {
    e.preventDefault();
    const uri = $("#tree-uri", section).value.trim() || $("#tree-root", section).value;
    openUri(uri);
  });
  $("#tree-root", section).addEventListener("change", () => openRoot($("#tree-root", section).value));
  return { connected, restore };
}

function roots(me) {
  const out = ["cairn://resources", "cairn://agent/skills"];
  if (me && me.user) out.push(`cairn://user/${me.user}/memories`, `cairn://user/${me.user}/skills`);
  return out;
}

function connected() {
  const select = $("#tree-root");
  clear(select, roots(ctx.me).map((uri) => h("option", { value: uri }, uri)));
  openRoot(select.value);
}

/** The view an address names: #tree?uri=... (a folder, or a file: its parent listed, the file read). */
function restore(params) {
  const uri = params.get("uri");
  if (uri) openUri(uri);
}

/** Open a URI typed or linked: a folder is listed; a file (a chunk, a display URI: its file) is
 * read beside its folder's listing. GET /v1/tree tells which: a file's children are its chunks. */
async function openUri(raw) {
  const uri = String(raw).replace(/\/\.(abstract|overview)\.md$/, "").split("#")[0];
  $("#tree-uri").value = uri;
  const asked = ++listing;
  let probe;
  try {
    probe = await ctx.api.get("/v1/tree", { uri, depth: 2, limit: PAGE });
  } catch (err) {
    if (asked === listing) clear($("#tree-list"), notice(err.status === 404 ? "info" : "error", describe(err)));
    return;
  }
  if (asked !== listing) return;
  if (!probe.children.length || probe.children[0].kind !== "chunk") return openRoot(uri, null, probe);
  const at = uri.lastIndexOf("/");
  openRoot(uri.slice(0, at), uri);
  return readFile({ uri, kind: "file", title: uri.slice(at + 1), abstract: "" }, probe);
}

let listing = 0; // the folder asked for last: an older listing that answers later is dropped

async function openRoot(uri, selected, listed) {
  const list = $("#tree-list");
  const asked = ++listing;
  clear(list, h("p", { class: "muted" }, `loading ${uri}…`));
  route("tree", { uri: selected || uri });
  try {
    const tree = listed || await ctx.api.get("/v1/tree", { uri, depth: 2, limit: PAGE });
    if (asked !== listing) return;
    const items = branch(tree.children);
    clear(list, h("p", { class: "tree-head" }, h("strong", {}, shortUri(uri)), ` — ${countText(tree.total)}`), items,
      moreButton(uri, tree, items));
    if (selected) {
      const label = list.querySelector(`.node[data-uri="${CSS.escape(selected)}"]`);
      if (label) select(label);
    }
  } catch (err) {
    if (asked === listing) clear(list, notice(err.status === 404 ? "info" : "error", describe(err)));
  }
}

/** A "more" button under a listing cut at a page: it appends the next page (GET /v1/tree's offset). */
function moreButton(uri, page, list) {
  if (page.next_offset === null || page.next_offset === undefined) return null;
  const shown = page.next_offset;
  const button = h("button", { type: "button", class: "more", "data-next": shown },
    `more (${shown} of ${page.total} shown)`);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const next = await ctx.api.get("/v1/tree", { uri, depth: 2, limit: PAGE, offset: shown });
      list.append(...next.children.map(node));
      button.replaceWith(moreButton(uri, next, list) || "");
    } catch (err) {
      button.replaceWith(notice("error", describe(err)));
    }
  });
  return button;
}

function countText(n) {
  return `${n} item${n === 1 ? "" : "s"}`;
}

function branch(nodes) {
  return h("ul", { role: "group" }, nodes.map(node));
}

function node(n) {
  const isDir = n.kind === "directory";
  const label = h("button", { class: `node ${n.kind}`, type: "button", "data-uri": n.uri, title: n.uri },
    h("span", { class: "icon", "aria-hidden": "true" }, isDir ? "▸" : "•"),
    h("span", { class: "title" }, n.title || shortUri(n.uri).split("/").pop()),
    isDir && n.children_total !== null && n.children_total !== undefined
      ? h("span", { class: "count", "data-count": n.children_total }, countText(n.children_total)) : null);
  const item = h("li", { "data-kind": n.kind }, label, h("p", { class: "abstract" }, n.abstract));
  let open = false;
  label.addEventListener("click", async () => {
    select(label);
    route("tree", { uri: n.uri });
    if (!isDir) return readFile(n);
    readFolder(n);
    open = !open;
    label.querySelector(".icon").textContent = open ? "▾" : "▸";
    for (const old of item.querySelectorAll(":scope > ul, :scope > .notice, :scope > .more")) old.remove();
    if (!open) return;
    try {
      const sub = await ctx.api.get("/v1/tree", { uri: n.uri, depth: 2, limit: PAGE });
      const items = branch(sub.children);
      item.append(items);
      const more = moreButton(n.uri, sub, items);
      if (more) item.append(more);
    } catch (err) {
      item.append(notice("error", describe(err)));
    }
  });
  return item;
}

function select(label) {
  for (const el of document.querySelectorAll(".node.selected")) el.classList.remove("selected");
  label.classList.add("selected");
}

async function readFolder(n) {
  const detail = $("#tree-detail");
  clear(detail, heading(n), h("h4", {}, "L0 abstract"), h("p", { class: "l0" }, n.abstract),
    h("h4", {}, "L1 overview"), h("pre", { class: "l1 text" }, "loading…"));
  try {
    const l1 = await ctx.api.get("/v1/contents", { uri: n.uri, level: 1 });
    $(".l1", detail).textContent = l1.text || "(empty)";
  } catch (err) {
    $(".l1", detail).replaceWith(notice("error", describe(err)));
  }
}

function heading(n) {
  return h("header", {},
    h("h3", {}, n.title || shortUri(n.uri)),
    h("p", { class: "uri" }, h("code", {}, n.uri), " ", h("span", { class: "badge" }, n.kind),
      n.context_type ? h("span", { class: "badge" }, n.context_type) : null,
      n.children_total !== undefined && n.children_total !== null ? h("span", { class: "badge" }, countText(n.children_total)) : null));
}

/** A file: its chunks with their citations (one request: GET /v1/tree of the file) and its body
 * (GET /v1/contents at L2, paged): two requests, and neither is a search. */
async function readFile(n, listed) {
  const detail = $("#tree-detail");
  const chunkBox = h("div", { class: "chunks" }, h("p", { class: "muted" }, "loading chunks…"));
  const bodyBox = h("pre", { class: "l2 text" }, "loading…");
  clear(detail, heading(n), h("h4", {}, "Chunks (L2 records) and where each is in the document"), chunkBox,
    h("h4", {}, "Full body (L2)"), bodyBox);
  chunks(n.uri, listed).then((list) => clear(chunkBox, list), (err) => clear(chunkBox, notice("error", describe(err))));
  body(n.uri, bodyBox);
}

async function chunks(uri, listed) {
  const found = listed && listed.total === listed.children.length ? listed : await ctx.api.get("/v1/tree", { uri, limit: MAX_CHUNKS });
  const list = h("ol", { class: "chunk-list" }, found.children.map((c) => h("li", { class: "chunk", "data-uri": c.uri },
    h("p", {}, h("code", {}, shortUri(c.uri)), " ", h("strong", {}, c.title)),
    c.citation ? h("p", { class: "citation" }, citationText(c.citation)) : h("p", { class: "citation muted" }, "no citation recorded"),
    h("pre", { class: "text" }, c.text || c.abstract))));
  const cut = found.total > found.children.length
    ? notice("info", `the first ${found.children.length} of ${found.total} chunks`) : null;
  return h("div", {}, list, cut);
}

export function citationText(c) {
  const parts = [];
  if (c.page) parts.push(`p. ${c.page}${c.page_end && c.page_end !== c.page ? "–" + c.page_end : ""}`);
  if (c.heading_path && c.heading_path.length) parts.push(`§ ${[].concat(c.heading_path).join(" › ")}`);
  if (c.start !== undefined && c.end !== undefined) parts.push(`characters ${c.start}–${c.end}`);
  if (c.kind && c.kind !== "text") parts.push(c.kind);
  return parts.join(" · ") || JSON.stringify(c);
}

async function body(uri, box, offset = 0) {
  try {
    const page = await ctx.api.get("/v1/contents", { uri, level: 2, offset, max_chars: 20000 });
    if (offset === 0) box.textContent = "";
    box.append(page.text);
    if (page.next_offset !== null && page.next_offset !== undefined) {
      const more = h("button", { type: "button", class: "more" }, `read on (${fmt(page.total_chars - page.next_offset, 0)} more characters)`);
      more.addEventListener("click", () => { more.remove(); body(uri, box, page.next_offset); });
      box.after(more);
    }
  } catch (err) {
    box.replaceWith(notice("error", describe(err)));
  }
}
