// The tenant's tree: folders with their L0 abstract, L1 overview and counts; a file's chunks
// with their citations and its full body (GET /v1/tree, GET /v1/contents, POST /v1/find).

import { ctx } from "./state.js";
import { describe } from "./api.js";
import { $, clear, fmt, h, notice, shortUri } from "./dom.js";

const MAX_CHUNKS = 200;
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
    openRoot(uri);
  });
  $("#tree-root", section).addEventListener("change", () => openRoot($("#tree-root", section).value));
  return { connected };
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

async function openRoot(uri) {
  const list = $("#tree-list");
  clear(list, h("p", { class: "muted" }, `loading ${uri}…`));
  try {
    const tree = await ctx.api.get("/v1/tree", { uri, depth: 2, limit: 200 });
    clear(list, h("p", { class: "tree-head" }, h("strong", {}, shortUri(uri)), ` — ${countText(tree.total)}`),
      branch(tree.children));
  } catch (err) {
    clear(list, notice(err.status === 404 ? "info" : "error", describe(err)));
  }
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
    if (!isDir) return readFile(n);
    readFolder(n);
    open = !open;
    label.querySelector(".icon").textContent = open ? "▾" : "▸";
    const old = item.querySelector(":scope > ul, :scope > .notice");
    if (old) old.remove();
    if (!open) return;
    try {
      const sub = await ctx.api.get("/v1/tree", { uri: n.uri, depth: 2, limit: 200 });
      item.append(branch(sub.children));
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

async function readFile(n) {
  const detail = $("#tree-detail");
  const chunkBox = h("div", { class: "chunks" }, h("p", { class: "muted" }, "loading chunks…"));
  const bodyBox = h("pre", { class: "l2 text" }, "loading…");
  clear(detail, heading(n), h("h4", {}, "L0 abstract"), h("p", { class: "l0" }, n.abstract),
    h("h4", {}, "Chunks (L2 records) and where each is in the document"), chunkBox,
    h("h4", {}, "Full body (L2)"), bodyBox);
  chunks(n).then((list) => clear(chunkBox, list), (err) => clear(chunkBox, notice("error", describe(err))));
  body(n.uri, bodyBox);
}

/** The file's chunks: each record's text (GET /v1/contents at L1), with the citation a search answers. */
async function chunks(n) {
  const found = [];
  for (let i = 0; i < MAX_CHUNKS; i++) {
    try {
      found.push(await ctx.api.get("/v1/contents", { uri: `${n.uri}#${i}`, level: 1 }));
    } catch (err) {
      if (err.status === 404) break;
      throw err;
    }
  }
  if (!found.length) found.push(await ctx.api.get("/v1/contents", { uri: n.uri, level: 1 }));
  const citations = await citationsOf(n, found);
  return h("ol", { class: "chunk-list" }, found.map((c) => {
    const cite = citations.get(c.uri);
    return h("li", { class: "chunk", "data-uri": c.uri },
      h("p", {}, h("code", {}, shortUri(c.uri)), " ", h("strong", {}, c.title)),
      cite ? h("p", { class: "citation" }, citationText(cite)) : h("p", { class: "citation muted" }, "no citation recorded"),
      h("pre", { class: "text" }, c.text));
  }));
}

/** Citations live on the chunks' records: a find for exactly those records (a filter on their
 * URIs, every score kept) answers each with its citation. */
async function citationsOf(n, found) {
  const out = new Map();
  const uris = found.map((c) => c.uri).slice(0, 100);
  try {
    const result = await ctx.api.post("/v1/find", {
      query: n.title || shortUri(n.uri), filter: { uri: { $in: uris } }, collapse_chunks: false,
      limit: uris.length, score_threshold: -1,
    });
    for (const m of [...result.resources, ...result.memories, ...result.skills]) {
      if (m.citation) out.set(m.uri, m.citation);
    }
  } catch {
    // citations are a help, not the listing: the chunks stay shown without them
  }
  return out;
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
