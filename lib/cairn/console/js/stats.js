// GET /v1/stats as charts: latency percentiles and the zero-result share per context type.

import { ctx } from "./state.js";
import { describe } from "./api.js";
import { $, clear, fmt, h, notice, s } from "./dom.js";

const LATENCY = [["latency_ms_p50", "p50"], ["latency_ms_p95", "p95"], ["latency_ms_mean", "mean"], ["latency_ms_max", "max"]];
export function mount(section) {
  clear(section, h("p", { class: "bar" }, h("button", { type: "button", id: "s-refresh" }, "Refresh"),
    h("span", { id: "s-since", class: "muted" })), h("div", { id: "s-out" }));
  $("#s-refresh", section).addEventListener("click", load);
  return { connected: load };
}

function rows(snapshot) {
  const types = Object.values(snapshot.by_type || {}).sort((a, b) => a.context_type.localeCompare(b.context_type));
  // a typed query of no type counts under "all" in by_type; the sum over every type is "total"
  return [...types, { ...snapshot.total, context_type: "total" }];
}

async function load() {
  const out = $("#s-out");
  try {
    const snapshot = await ctx.api.get("/v1/stats");
    $("#s-since").textContent = ` since ${new Date(snapshot.since * 1000).toISOString().replace("T", " ").slice(0, 19)} UTC (this server process)`;
    const data = rows(snapshot);
    if (!snapshot.total.queries) {
      return clear(out, notice("info", "no queries yet: run one in the query pane, then refresh"), table(data));
    }
    clear(out, h("div", { class: "charts" }, latencyChart(data), zeroChart(data)), table(data));
  } catch (err) {
    clear(out, notice("error", describe(err)));
  }
}

function latencyChart(data) {
  const W = 600;
  const rowH = 18 * LATENCY.length + 14;
  const H = 30 + data.length * rowH + 20;
  const max = Math.max(1, ...data.flatMap((t) => LATENCY.map(([k]) => t[k] || 0)));
  const left = 90;
  const x = (v) => ((W - left - 100) * v) / max;
  const nodes = [s("text", { x: 0, y: 16, class: "chart-title" }, "latency (ms) by context type")];
  data.forEach((t, i) => {
    const top = 30 + i * rowH;
    nodes.push(s("text", { x: 0, y: top + 30, class: "axis" }, t.context_type));
    LATENCY.forEach(([key, label], j) => {
      const v = t[key];
      const y = top + j * 18;
      nodes.push(s("g", { class: `bar ${label}`, "data-type": t.context_type, "data-measure": label },
        s("title", {}, `${t.context_type} ${label}: ${fmt(v, 1)} ms`),
        s("rect", { x: left, y, width: Math.max(x(v || 0), 1), height: 14 }),
        s("text", { x: left + x(v || 0) + 4, y: y + 11, class: "value" }, `${label} ${fmt(v, 1)}`)));
    });
  });
  return h("figure", { class: "chart" }, s("svg", { id: "chart-latency", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "latency percentiles" }, nodes));
}

function zeroChart(data) {
  const W = 420;
  const H = 30 + data.length * 26 + 10;
  const left = 90;
  const nodes = [s("text", { x: 0, y: 16, class: "chart-title" }, "share of queries with no result")];
  data.forEach((t, i) => {
    const share = t.queries ? t.zero_result_queries / t.queries : 0;
    const y = 30 + i * 26;
    const full = W - left - 110;
    nodes.push(s("text", { x: 0, y: y + 13, class: "axis" }, t.context_type),
      s("rect", { x: left, y, width: full, height: 18, class: "track" }),
      s("g", { class: "bar zero", "data-type": t.context_type, "data-share": share.toFixed(4) },
        s("title", {}, `${t.zero_result_queries} of ${t.queries} queries found nothing`),
        s("rect", { x: left, y, width: Math.max(full * share, share ? 1 : 0), height: 18 }),
        s("text", { x: left + full + 6, y: y + 13, class: "value" }, `${(100 * share).toFixed(1)} % (${t.zero_result_queries}/${t.queries})`)));
  });
  return h("figure", { class: "chart" }, s("svg", { id: "chart-zero", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "zero-result share" }, nodes));
}

function table(data) {
  const cols = [["context_type", "type"], ["queries", "queries"], ["results", "results"], ["zero_result_queries", "no result"],
    ["score_mean", "mean score"], ["latency_ms_p50", "p50 ms"], ["latency_ms_p95", "p95 ms"], ["vector_calls", "vector calls"],
    ["rounds", "rounds"], ["rerank_used", "reranked"], ["rerank_fallbacks", "rerank fallbacks"]];
  return h("div", { class: "table-scroll" }, h("table", { class: "stats" }, h("thead", {}, h("tr", {}, cols.map(([, label]) => h("th", {}, label)))),
    h("tbody", {}, data.map((t) => h("tr", { "data-type": t.context_type }, cols.map(([key]) =>
      h("td", {}, typeof t[key] === "number" && !Number.isInteger(t[key]) ? fmt(t[key], key.startsWith("score") ? 3 : 1) : String(t[key] ?? "–"))))))));
}
