// Ingest: files read in the browser as text and sent to PUT /v1/documents in batches, with
// progress and the list of what was skipped and why (here, or by cairn).

import { ctx } from "./state.js";
import { describe, may } from "./api.js";
import { $, clear, h, notice } from "./dom.js";

const BATCH_DOCS = 50;
const BATCH_BYTES = 4 * 1024 * 1024; // under the API's 6 MB request limit, JSON escaping included
const MAX_FILE_BYTES = 5 * 1024 * 1024;
const BINARY = /\.(pdf|docx?|pptx?|xlsx?|odt|rtf|epub|zip|gz|tar|png|jpe?g|gif|webp|mp[34]|wav|exe|bin)$/i;
export function mount(section) {
  clear(section,
    h("form", { id: "ingest-form", class: "grid-form" },
      h("label", { class: "wide" }, "into folder", h("input", { id: "i-root", type: "text", value: "cairn://resources/uploads", required: true })),
      h("label", {}, "files", h("input", { id: "i-files", type: "file", multiple: true })),
      h("label", {}, "or a folder", h("input", { id: "i-folder", type: "file", webkitdirectory: true, multiple: true })),
      h("button", { type: "submit", id: "i-run" }, "Upload")),
    h("p", { class: "muted" },
      "Text files (Markdown, plain text, HTML, JSON, CSV, code…) are read here and sent as JSON documents to PUT /v1/documents. ",
      "The API takes text: PDF, Office and other binary files are skipped here — ingest them with ",
      h("code", {}, "cairn ingest PATH --uri URI"), " (parsers of the docs extra) or from S3."),
    h("progress", { id: "i-progress", max: 1, value: 0, hidden: true }),
    h("p", { id: "i-status", "aria-live": "polite" }),
    h("div", { id: "i-report" }));
  $("#ingest-form", section).addEventListener("submit", upload);
  return { connected };
}

function connected() {
  const allowed = may(ctx.me, "put_documents");
  $("#i-run").disabled = !allowed;
  clear($("#i-status"), allowed ? null : notice("info", `this key (role ${ctx.me.role}) may not upload documents`));
  if (ctx.me.user) { // a key bound to one user writes that user's folders only, never the shared ones
    $("#i-root").value = `${ownRoot()}/skills/uploads`;
    clear($("#i-status"), notice("info", `this key acts for ${ctx.me.user}: it uploads under ${ownRoot()}/ only`));
  }
}

function ownRoot() {
  return `cairn://user/${ctx.me.user}`;
}

function pathOf(file) {
  return file.webkitRelativePath || file.name;
}

/** The file's text, or why it cannot be sent as a text document. */
async function readText(file) {
  if (BINARY.test(file.name)) return { skip: `a binary format (${file.name.split(".").pop().toUpperCase()}): the API takes text; use cairn ingest or the S3 ingest` };
  if (file.size > MAX_FILE_BYTES) return { skip: `${file.size} bytes: over ${MAX_FILE_BYTES} bytes for one request; use cairn ingest` };
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (bytes.subarray(0, 8192).includes(0)) return { skip: "binary content (NUL bytes): the API takes text" };
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    if (!text.trim()) return { skip: "empty: no text to index" };
    return { text };
  } catch {
    return { skip: "not UTF-8 text: save it as UTF-8, or use cairn ingest" };
  }
}

function batches(docs) {
  const out = [];
  let current = [];
  let size = 0;
  for (const doc of docs) {
    const bytes = doc.text.length * 2 + 200;
    if (current.length && (current.length >= BATCH_DOCS || size + bytes > BATCH_BYTES)) {
      out.push(current);
      current = [];
      size = 0;
    }
    current.push(doc);
    size += bytes;
  }
  if (current.length) out.push(current);
  return out;
}

async function upload(event) {
  event.preventDefault();
  const files = [...$("#i-files").files, ...$("#i-folder").files];
  const rootUri = $("#i-root").value.trim();
  const status = $("#i-status");
  const progress = $("#i-progress");
  const report = $("#i-report");
  clear(report);
  if (!files.length) return clear(status, notice("error", "pick files or a folder first"));
  if (ctx.me && ctx.me.user && !rootUri.startsWith(`${ownRoot()}/`)) {
    return clear(status, notice("error", `this key acts for ${ctx.me.user}: pick a folder under ${ownRoot()}/`));
  }
  const skipped = [];
  const docs = [];
  for (const file of files) {
    const read = await readText(file);
    if (read.skip) skipped.push({ source: pathOf(file), reason: read.skip, by: "console" });
    else docs.push({ path: pathOf(file), text: read.text });
  }
  const parts = batches(docs);
  progress.hidden = false;
  progress.max = Math.max(docs.length, 1);
  progress.value = 0;
  const totals = { documents: 0, records: 0, written: 0, unchanged: 0, warnings: [] };
  for (const part of parts) {
    status.textContent = `sending ${progress.value + part.length} of ${docs.length} documents…`;
    try {
      const done = await ctx.api.put("/v1/documents", { root_uri: rootUri, documents: part });
      for (const k of ["documents", "records", "written", "unchanged"]) totals[k] += done[k];
      totals.warnings.push(...done.warnings);
      for (const r of done.rejected) {
        const at = r.indexOf(": ");
        skipped.push({ source: at > 0 ? r.slice(0, at) : r, reason: at > 0 ? r.slice(at + 2) : "rejected", by: "cairn" });
      }
    } catch (err) {
      for (const d of part) skipped.push({ source: d.path, reason: describe(err), by: "cairn" });
    }
    progress.value += part.length;
  }
  status.textContent = `done: ${totals.documents} documents → ${totals.records} records (${totals.written} written, ${totals.unchanged} unchanged) under ${rootUri}`;
  clear(report,
    totals.warnings.length ? h("ul", { class: "warnings" }, totals.warnings.map((w) => h("li", {}, w))) : null,
    h("h3", {}, `skipped (${skipped.length})`),
    skipped.length
      ? h("div", { class: "table-scroll" }, h("table", { class: "skipped" }, h("thead", {}, h("tr", {}, h("th", {}, "file"), h("th", {}, "why"), h("th", {}, "by"))),
        h("tbody", {}, skipped.map((x) => h("tr", {}, h("td", {}, x.source), h("td", {}, x.reason), h("td", {}, x.by))))))
      : h("p", { class: "muted" }, "nothing skipped"));
}
