// The tenant at a glance (GET /v1/overview): its documents, records, memories, sessions, index
// size, and the queries it answered per minute over the last day, drawn as bars.

import { ctx } from "./state.js";
import { UNAVAILABLE, describe } from "./api.js";
import { $, clear, h, notice, s } from "./dom.js";

export function mount(section) {
  clear(section, h("p", { class: "bar" }, h("button", { type: "button", id: "o-refresh" }, "Refresh")),
    h("div", { id: "o-out" }));
  $("#o-refresh", section).addEventListener("click", load);
  return { connected: load };
}

const FIGURES = [["documents", "documents"], ["records", "records in the index"], ["folders", "folders"],
  ["memories", "memories"], ["users", "users with memories"], ["sessions", "their sessions"],
  ["store_bytes", "index size"], ["queries", "typed queries answered"]];

function size(bytes) {
  if (bytes === null || bytes === undefined) return "not told by this store";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let n = bytes;
  let u = 0;
  while (n >= 1024 && u < units.length - 1) { n /= 1024; u += 1; }
  return `${n.toFixed(u ? 1 : 0)} ${units[u]}`;
}

async function load() {
  const out = $("#o-out");
  try {
    const o = await ctx.api.get("/v1/overview");
    clear(out,
      h("dl", { class: "overview-figures" }, FIGURES.map(([key, label]) => h("div", { class: "figure", "data-figure": key },
        h("dt", {}, label), h("dd", {}, key === "store_bytes" ? size(o[key]) : String(o[key]))))),
      o.exact ? null : notice("info", "the index holds more records than were read for these counts: they are lower bounds"),
      h("p", { class: "muted" }, "records by level: ",
        Object.entries(o.records_by_level).map(([level, n]) => `${level} ${n}`).join(" · ")),
      timeline(o.queries_over_time));
  } catch (err) {
    clear(out, err.unavailable ? notice("unavailable", `overview: ${UNAVAILABLE}`) : notice("error", describe(err)));
  }
}

function clock(epoch) {
  return new Date(epoch * 1000).toISOString().slice(11, 16);
}

/** Queries per minute (this server process), one bar a minute that had any, oldest first. */
function timeline(buckets) {
  if (!buckets.length) return notice("info", "no queries yet in this server process");
  const W = Math.max(360, 40 + buckets.length * 14);
  const H = 170;
  const max = Math.max(1, ...buckets.map((b) => b.queries));
  const y = (v) => 20 + (H - 60) * (1 - v / max);
  const nodes = [s("text", { x: 0, y: 14, class: "chart-title" }, "typed queries per minute (UTC), this server process")];
  buckets.forEach((b, i) => {
    const x = 34 + i * 14;
    nodes.push(s("g", { class: "bar minute", "data-start": b.start, "data-queries": b.queries },
      s("title", {}, `${clock(b.start)}: ${b.queries} queries, ${b.zero_result_queries} with no result`),
      s("rect", { x, y: y(b.queries), width: 10, height: H - 40 - y(b.queries), class: "p50" }),
      b.zero_result_queries ? s("rect", { x, y: y(b.zero_result_queries), width: 10, height: H - 40 - y(b.zero_result_queries), class: "zero" }) : null));
  });
  nodes.push(s("text", { x: 0, y: y(max) + 4, class: "axis" }, String(max)), s("text", { x: 0, y: H - 40, class: "axis" }, "0"),
    s("text", { x: 34, y: H - 22, class: "axis" }, clock(buckets[0].start)),
    s("text", { x: W - 4, y: H - 22, class: "axis", "text-anchor": "end" }, clock(buckets[buckets.length - 1].start)));
  return h("figure", { class: "chart" }, s("svg", { id: "chart-queries", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
    "aria-label": "typed queries per minute" }, nodes),
  h("figcaption", {}, `${buckets.reduce((n, b) => n + b.queries, 0)} typed queries in ${buckets.length} minute${buckets.length === 1 ? "" : "s"} with any`));
}
