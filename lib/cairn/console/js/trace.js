// The trace of one typed query as a picture (SVG): the stages it went through, the folders each
// round opened, every candidate by tier and score (kept or dropped), and where and why it stopped.
// It reads what include_provenance returns: {query, searched_directories, matches, trace}.

import { fmt, h, s, shortUri } from "./dom.js";

const STOPS = {
  single_search: "quick mode: one search of the scope",
  deepened: "quick mode: searched deeper, a few documents' chunks filled the page",
  no_roots: "nothing to search: no root for this type and user",
  no_evidence: "the evidence gate found no evidence",
  max_rounds: "the round budget was spent",
  max_vector_calls: "the vector-call budget was spent",
  deadline: "the time budget was spent",
  frontier_empty: "no folder left to open",
  converged: "the top results stopped changing",
  pool_stable: "no new candidates came in",
};
// drawn at its own size in a box that scrolls sideways: never scaled down (text stays 12 px and more)
const BOX_W = 172;
const BOX_H = 72;
const GAP = 22;
const TIERS = ["L0", "L1", "L2"];

export function stopText(reason) {
  return STOPS[reason] || reason || "not recorded";
}

/** What the evidence gate decided, from its events (none: a query word occurs in the content). */
export function gateOf(trace) {
  const all = trace.events || [];
  // the gate decides before anything is searched: its events are the ones before the first search
  // (later uri-less keeps are the boost's and the user's memories', not the gate's)
  const first = all.findIndex((e) => e.kind === "global_search");
  const events = first < 0 ? all : all.slice(0, first);
  const gate = events.find((e) => (e.kind === "keep" || e.kind === "exclude") && !e.uri);
  if (gate && gate.kind === "exclude") return { state: "dropped", detail: gate.detail };
  if (trace.stats && trace.stats.stop_reason === "no_evidence") return { state: "dropped", detail: "no evidence" };
  if (gate) return { state: "kept", detail: gate.detail };
  const skipped = events.find((e) => e.kind === "fallback" && /evidence gate/.test(e.detail || ""));
  if (skipped) return { state: "skipped", detail: skipped.detail };
  return { state: "passed", detail: "a query word occurs in the content it may search" };
}

function clip(text, chars) {
  const t = String(text ?? "");
  return t.length > chars ? t.slice(0, chars - 1) + "…" : t;
}

/** Words wrapped into lines of at most ``chars`` characters; at most ``max`` lines (the last clipped). */
function wrap(lines, chars, max) {
  const out = [];
  for (const line of lines) {
    let current = "";
    for (const word of String(line ?? "").split(/\s+/).filter(Boolean)) {
      if (current && (current + " " + word).length > chars) {
        out.push(current);
        current = word;
      } else current = current ? `${current} ${word}` : word;
    }
    if (current) out.push(current);
  }
  return out.length > max ? [...out.slice(0, max - 1), clip(out.slice(max - 1).join(" "), chars)] : out;
}

function box(x, y, kind, title, lines, tip) {
  return s("g", { class: `stage ${kind}`, "data-stage": kind },
    s("title", {}, tip || [title, ...lines].join("\n")),
    s("rect", { x, y, width: BOX_W, height: BOX_H, rx: 6 }),
    s("text", { x: x + 8, y: y + 18, class: "stage-title" }, clip(title, 22)),
    wrap(lines, 23, 3).map((line, i) => s("text", { x: x + 8, y: y + 35 + i * 14, class: "stage-line" }, clip(line, 24))));
}

function arrow(x1, y, x2) {
  return s("line", { x1, y1: y, x2: x2 - 3, y2: y, class: "arrow", "marker-end": "url(#arrowhead)" });
}

/** The stages in the order they ran: query, gate, each search, feedback, each round, rerank, stop. */
function stages(p) {
  const trace = p.trace || { events: [], stats: {} };
  const stats = trace.stats || {};
  const q = p.query || {};
  const gate = gateOf(trace);
  const out = [{ kind: "query", title: `query (${q.context_type || "any type"})`, lines: [q.query, q.intent || ""] },
    { kind: `gate gate-${gate.state}`, title: `evidence gate: ${gate.state}`, lines: [gate.detail], tip: gate.detail }];
  let searches = 0;
  for (const e of trace.events || []) {
    const last = out[out.length - 1];
    if (e.kind === "global_search") {
      const hits = /hits=(\d+)/.exec(e.detail || "");
      const mode = /mode=(\w+)/.exec(e.detail || "");
      searches += 1;
      out.push({ kind: "search", title: searches === 1 ? "search of the scope" : "search again", lines: [`${hits ? hits[1] : "?"} hits`, mode ? mode[1] : ""], tip: e.detail });
    } else if (e.kind === "feedback") {
      out.push({ kind: "feedback", title: "relevance feedback", lines: [e.detail], tip: e.detail });
    } else if (e.kind === "expand") {
      if (last.kind === "round" && last.round === e.round) last.folders.push(e);
      else out.push({ kind: "round", round: e.round, title: `round ${e.round}`, folders: [e] });
    }
  }
  for (const st of out.filter((x) => x.kind === "round")) {
    st.lines = [`${st.folders.length} folder${st.folders.length === 1 ? "" : "s"} opened`];
  }
  out.push({ kind: "stop", title: `stop: ${stats.stop_reason || "?"}`, lines: [stopText(stats.stop_reason),
    `${stats.candidates_kept ?? 0} candidates handed on`], tip: stopText(stats.stop_reason) });
  for (const e of (trace.events || []).filter((ev) => ev.kind === "rerank")) {
    out.push({ kind: "rerank", title: "rerank", lines: [e.detail], tip: e.detail });
  }
  const results = (p.matches || []).length;
  out.push({ kind: "results", title: `${results} result${results === 1 ? "" : "s"}`,
    lines: ["after threshold, dedupe, limit", `${stats.candidates_excluded ?? 0} dropped in all`],
    tip: "candidates under the score threshold, duplicates and those past the limit are dropped" });
  return out;
}

function flow(p, width) {
  const list = stages(p);
  const nodes = [];
  let maxFolders = 0;
  list.forEach((st, i) => {
    const x = 10 + i * (BOX_W + GAP);
    nodes.push(box(x, 10, st.kind, st.title, st.lines, st.tip));
    if (i > 0) nodes.push(arrow(x - GAP, 10 + BOX_H / 2, x));
    (st.folders || []).slice(0, 8).forEach((f, j) => {
      nodes.push(s("g", { class: "folder", "data-uri": f.uri },
        s("title", {}, `${f.uri}\nscore ${fmt(f.score)} · ${f.detail || ""}`),
        s("rect", { x, y: 10 + BOX_H + 10 + j * 24, width: BOX_W, height: 20, rx: 3 }),
        s("text", { x: x + 6, y: 10 + BOX_H + 24 + j * 24, class: "stage-line" },
          `${clip(shortUri(f.uri).split("/").slice(-2).join("/"), 17)} ${fmt(f.score, 2)}`)));
      maxFolders = Math.max(maxFolders, j + 1);
    });
    if ((st.folders || []).length > 8) {
      nodes.push(s("text", { x, y: 10 + BOX_H + 24 + 8 * 24, class: "stage-line" }, `+${st.folders.length - 8} more`));
      maxFolders = 9;
    }
  });
  const w = Math.max(width, 20 + list.length * (BOX_W + GAP));
  return { nodes, width: w, height: 20 + BOX_H + (maxFolders ? 14 + maxFolders * 24 : 0) };
}

/** Every candidate at its score, one row per tier: kept (filled, numbered by rank) and dropped (hollow). */
function strip(p, top, width) {
  const kept = (p.matches || []).map((m, i) => ({ ...m, rank: i + 1, kept: true }));
  const dropped = (p.trace.events || []).filter((e) => e.kind === "exclude" && e.uri)
    .map((e) => ({ uri: e.uri, score: e.score, tier: (/^(L\d)/.exec(e.detail || "") || [null, "L2"])[1], reason: e.detail, kept: false }));
  const all = [...kept, ...dropped];
  const scores = all.map((c) => c.score).filter(Number.isFinite);
  const lo = Math.min(0, ...scores);
  const hi = Math.max(1, ...scores);
  const left = 60;
  const right = width - 20;
  const x = (v) => left + ((v - lo) / (hi - lo || 1)) * (right - left);
  const rowY = (tier) => top + 30 + TIERS.indexOf(tier) * 30;
  const nodes = [s("text", { x: 10, y: top + 10, class: "stage-title" }, "candidates by tier and score (● kept, ○ dropped)")];
  for (const tier of TIERS) {
    nodes.push(s("text", { x: 10, y: rowY(tier) + 4, class: "axis" }, tier),
      s("line", { x1: left, x2: right, y1: rowY(tier), y2: rowY(tier), class: "grid" }));
  }
  for (let t = 0; t <= 4; t++) {
    const v = lo + ((hi - lo) * t) / 4;
    nodes.push(s("text", { x: x(v), y: top + 26 + 3 * 30, class: "axis", "text-anchor": "middle" }, fmt(v, 2)));
  }
  const last = {};  // per row: the x of the shape before, to lift a shape off its neighbour
  const placed = all.filter((c) => Number.isFinite(c.score)).sort((a, b) => a.score - b.score);
  for (const c of placed) {
    const tier = TIERS.includes(c.tier) ? c.tier : "L2";
    const crowded = last[tier] && x(c.score) - last[tier].x < 19;
    const lift = crowded ? (last[tier].lift === 0 ? -11 : 0) : 0;
    last[tier] = { x: x(c.score), lift };
    const cy = rowY(tier) + lift;
    nodes.push(s("g", { class: `cand ${c.kept ? "kept" : "dropped"}`, "data-uri": c.uri },
      s("title", {}, `${c.kept ? "#" + c.rank + " kept" : "dropped"} · ${c.uri}\nscore ${fmt(c.score)} · ${c.reason || ""}`),
      s("circle", { cx: x(c.score), cy, r: c.kept ? 9 : 5 }),
      c.kept ? s("text", { x: x(c.score), y: cy + 4, class: "rank", "text-anchor": "middle" }, c.rank) : null));
  }
  return { nodes, height: 26 + 3 * 30 + 10, all };
}

/** What the picture's tooltips hold, as text that keyboard and touch reach: each stage's details,
 * and every candidate with its URI, score and why it was kept or dropped. */
function details(list, candidates) {
  return h("div", { class: "trace-details" },
    h("details", { class: "stage-details" }, h("summary", {}, `the ${list.length} stages in detail`),
      h("ol", {}, list.map((st) => h("li", { "data-stage": st.kind.split(" ")[0] }, h("strong", {}, st.title), " — ",
        st.tip || st.lines.filter(Boolean).join(" · "),
        (st.folders || []).length ? h("ul", {}, st.folders.map((f) => h("li", {}, h("code", {}, f.uri), ` score ${fmt(f.score)}`,
          f.detail ? ` · ${f.detail}` : ""))) : null)))),
    h("details", { class: "candidate-details" }, h("summary", {}, `the ${candidates.length} candidates in detail`),
      h("ol", {}, candidates.map((c) => h("li", { class: c.kept ? "kept" : "dropped" },
        `${c.kept ? "#" + c.rank + " kept" : "dropped"} · ${c.tier || "L2"} · score ${fmt(c.score)} · `, h("code", {}, c.uri),
        c.reason ? ` · ${c.reason}` : "")))));
}

/** One typed query's trace as a figure: an SVG picture and the numbers beside it. */
export function traceFigure(p, index) {
  const width = 900;
  const top = flow(p, width);
  const bottom = strip(p, top.height + 10, top.width);
  const height = top.height + 10 + bottom.height;
  const stats = (p.trace && p.trace.stats) || {};
  const svg = s("svg", { class: "trace", viewBox: `0 0 ${top.width} ${height}`, width: top.width, height, role: "img",
    "aria-label": `trace of typed query ${index + 1}: ${(p.query || {}).query || ""}` },
    top.nodes, bottom.nodes);
  const notes = (p.trace.events || []).filter((e) => e.kind === "fallback" && !/evidence gate/.test(e.detail || ""));
  return h("figure", { class: "trace-figure", "data-query": index },
    h("div", { class: "svg-scroll", tabindex: 0, role: "region", "aria-label": `trace picture of typed query ${index + 1}, scrolls sideways` }, svg),
    details(stages(p), bottom.all),
    h("figcaption", {},
      `typed query ${index + 1} · ${stats.mode || "?"} mode · ${stats.rounds ?? 0} rounds · ${stats.vector_calls ?? 0} vector calls · `
      + `${(p.searched_directories || []).length} folders searched · ${fmt(stats.latency_ms, 1)} ms`
      + (stats.rerank_used ? " · reranked" : "") + (stats.rerank_fallback ? ` · rerank fell back: ${stats.rerank_fallback}` : ""),
      notes.length ? h("ul", { class: "fallbacks" }, notes.map((e) => h("li", {}, `fallback: ${e.detail}`))) : null));
}
