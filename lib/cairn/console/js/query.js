// The query pane: find / search / context with a session or user, mode, limit and filter; the
// results with why each is there, the plan, and each typed query's trace as a picture.

import { ctx, open, route } from "./state.js";
import { UNAVAILABLE, describe, may } from "./api.js";
import { $, clear, debounce, fmt, h, notice, shortUri } from "./dom.js";
import { citationText } from "./tree.js";
import { traceFigure } from "./trace.js";

export function mount(section) {
  clear(section,
    h("form", { id: "query-form", class: "grid-form" },
      h("fieldset", { class: "ops" }, h("legend", {}, "operation"),
        ["find", "search", "context"].map((op) => h("label", {},
          h("input", { type: "radio", name: "op", value: op, checked: op === "search" }), ` ${op}`))),
      h("label", { class: "wide" }, "query", h("input", { id: "q-text", type: "text", required: true, placeholder: "what the agent asks" })),
      h("label", {}, "session", h("input", { id: "q-session", type: "text", list: "q-sessions", placeholder: "session id (search, context)" })),
      h("datalist", { id: "q-sessions" }),
      h("label", {}, "user", h("input", { id: "q-user", type: "text", placeholder: "end user (optional)" })),
      h("label", {}, "mode", h("select", { id: "q-mode" },
        h("option", { value: "" }, "default"), h("option", { value: "quick" }, "quick"), h("option", { value: "thinking" }, "thinking"))),
      h("label", {}, "limit", h("input", { id: "q-limit", type: "number", min: 1, max: 100, value: 10 })),
      h("label", {}, h("input", { id: "q-rerank", type: "checkbox" }), " rerank"),
      h("details", { class: "wide new-session" }, h("summary", {}, "start a session from a conversation"),
        h("textarea", { id: "q-dialogue", rows: 3, placeholder: "user: I paid for the annual plan last week.\nassistant: How can I help?" }),
        h("button", { type: "button", id: "q-new-session" }, "Create session"), " ",
        h("span", { id: "q-session-status", "aria-live": "polite" })),
      h("label", { class: "wide" }, "filter (JSON, checked by cairn as you type)",
        h("textarea", { id: "q-filter", rows: 2, spellcheck: "false", placeholder: '{"metadata.lang": "en"}' })),
      h("p", { id: "filter-status", class: "filter-status wide", "aria-live": "polite" }),
      h("button", { type: "submit", id: "q-run" }, "Run")),
    h("div", { id: "query-out" }));
  $("#query-form", section).addEventListener("submit", run);
  $("#q-filter", section).addEventListener("input", debounce(checkFilter, 300));
  $("#q-user", section).addEventListener("change", (e) => loadSessions(e.target.value.trim()));
  $("#q-new-session", section).addEventListener("click", newSession);
  return { connected, restore };
}

const FIELDS = { q: "#q-text", session: "#q-session", user: "#q-user", mode: "#q-mode", limit: "#q-limit" };

/** The view an address names: #query?op=search&q=...&session=...&user=...&mode=...&limit=... runs it again. */
function restore(params) {
  const op = params.get("op");
  if (!params.get("q") || !["find", "search", "context"].includes(op)) return;
  document.querySelector(`input[name=op][value=${op}]`).checked = true;
  for (const [name, selector] of Object.entries(FIELDS)) {
    const input = $(selector);
    if (params.has(name) && !input.readOnly) input.value = params.get(name);
  }
  $("#query-form").requestSubmit();
}

function connected() {
  const user = $("#q-user");
  user.value = ctx.me.user || user.value;
  user.readOnly = Boolean(ctx.me.user);
  loadSessions(user.value);
  $("#q-new-session").disabled = !may(ctx.me, "create_session");
}

async function loadSessions(user) {
  const list = $("#q-sessions");
  clear(list);
  if (!user) return;
  try {
    const found = await ctx.api.get(`/v1/users/${encodeURIComponent(user)}/sessions`);
    clear(list, (found.sessions || []).map((sn) => h("option", { value: sn.id }, `${sn.summary || ""} (${sn.last_seq} messages)`)));
  } catch {
    // the session box still takes an id typed by hand
  }
}

/** A session for the chosen user, with the conversation typed in (one message a line, "role: text"). */
async function newSession() {
  const status = $("#q-session-status");
  const user = $("#q-user").value.trim();
  const lines = $("#q-dialogue").value.split("\n").map((l) => l.trim()).filter(Boolean);
  try {
    const session = await ctx.api.post("/v1/sessions", user ? { user } : {});
    for (const line of lines) {
      const m = /^(user|assistant)\s*:\s*(.*)$/i.exec(line);
      await ctx.api.post(`/v1/sessions/${encodeURIComponent(session.id)}/messages`,
        { role: m ? m[1].toLowerCase() : "user", content: m ? m[2] : line });
    }
    $("#q-session").value = session.id;
    status.textContent = `session ${session.id.slice(0, 8)} of ${session.user || "no user"}, ${lines.length} message${lines.length === 1 ? "" : "s"}`;
  } catch (err) {
    status.textContent = describe(err);
  }
}

function filterValue() {
  const raw = $("#q-filter").value.trim();
  if (!raw) return { filter: null };
  try {
    return { filter: JSON.parse(raw) };
  } catch (err) {
    return { error: `not JSON: ${err.message}` };
  }
}

/** cairn checks the filter: a dry request (limit 0 is refused before any search runs), whose 400
 * lists every problem of the body; the filter's own are shown, in cairn's words. */
async function checkFilter() {
  const status = $("#filter-status");
  const { filter, error } = filterValue();
  status.className = "filter-status wide";
  if (error) return setStatus(status, "bad", error);
  if (filter === null) return setStatus(status, "", "");
  if (!ctx.me) return setStatus(status, "bad", "connect first");
  try {
    await ctx.api.post("/v1/find", { query: "filter check", filter, limit: 0 });
    setStatus(status, "ok", "filter accepted");
  } catch (err) {
    const problems = (err.details || []).filter((p) => String(p).startsWith("filter"));
    if (err.status === 400 && !problems.length) return setStatus(status, "ok", "filter accepted by cairn");
    setStatus(status, "bad", problems.length ? problems.join("; ") : describe(err));
  }
}

function setStatus(node, kind, text) {
  node.classList.toggle("ok", kind === "ok");
  node.classList.toggle("bad", kind === "bad");
  node.textContent = text;
}

function requestBody(op) {
  const body = { query: $("#q-text").value, include_provenance: true };
  const user = $("#q-user").value.trim();
  const session = $("#q-session").value.trim();
  const mode = $("#q-mode").value;
  const limit = Number($("#q-limit").value);
  const { filter, error } = filterValue();
  if (error) throw new Error(`filter: ${error}`);
  if (user) body.user = user;
  if (mode) body.mode = mode;
  if (filter) body.filter = filter;
  if (op !== "context") {
    body.limit = limit;
    body.rerank = $("#q-rerank").checked;
  }
  if (op !== "find" && session) body.session_id = session;
  if (op === "context") delete body.include_provenance;
  return body;
}

async function run(event) {
  event.preventDefault();
  const out = $("#query-out");
  const op = document.querySelector("input[name=op]:checked").value;
  let body;
  try {
    body = requestBody(op);
  } catch (err) {
    return clear(out, notice("error", err.message));
  }
  clear(out, h("p", { class: "muted" }, `POST /v1/${op} …`));
  route("query", { op, q: body.query, session: body.session_id, user: body.user, mode: body.mode,
    limit: body.limit === 10 ? undefined : body.limit });
  try {
    const answer = await ctx.api.post(`/v1/${op}`, body);
    clear(out, op === "context" ? contextView(answer) : resultView(answer));
  } catch (err) {
    clear(out, notice(err.unavailable ? "unavailable" : "error", err.unavailable ? `${op}: ${UNAVAILABLE}` : describe(err)));
  }
}

const REASONS = {
  global: "the first search, over every root the query may see",
  vector: "dense similarity to the query",
  keyword: "the query's words (BM25)",
  hybrid: "dense similarity and the query's words, fused",
  rerank: "the reranker's score",
};

function reasonText(reason) {
  if (!reason) return "";
  if (reason.startsWith("child-of:")) return `inside folder ${shortUri(reason.slice(9))}, opened while searching`;
  if (reason.startsWith("under:")) return `under folder ${shortUri(reason.slice(6))}, which the plan named`;
  return REASONS[reason] || reason;
}

/** Why a result is there: the typed queries that found it, how, at which tier and score. */
function why(match, provenance) {
  const lines = [];
  (provenance || []).forEach((p, i) => {
    const m = (p.matches || []).find((x) => x.uri === match.uri);
    if (!m) return;
    const q = p.query || {};
    lines.push(`typed query ${i + 1} “${q.query}” (${q.context_type || "any type"}) found it at ${m.tier} with score ${fmt(m.score)}: ${reasonText(m.reason)}`);
  });
  return lines.length ? lines : ["no provenance for this result"];
}

function resultView(answer) {
  const all = [...answer.memories, ...answer.resources, ...answer.skills].sort((a, b) => b.score - a.score);
  return h("div", { class: "answer" },
    h("h3", {}, `${answer.total} result${answer.total === 1 ? "" : "s"}`),
    all.length ? h("ol", { class: "results" }, all.map((m) => h("li", { class: "result", "data-uri": m.uri },
      h("p", {}, h("span", { class: "score" }, fmt(m.score)), " ", h("span", { class: "badge" }, `L${m.level}`), " ",
        h("span", { class: "badge" }, m.context_type), " ", h("strong", {}, m.title || shortUri(m.uri))),
      h("p", { class: "uri" }, h("code", {}, m.uri), m.citation ? h("span", { class: "citation" }, ` — ${citationText(m.citation)}`) : null),
      h("p", { class: "abstract" }, m.abstract),
      h("ul", { class: "why" }, why(m, answer.provenance).map((line) => h("li", {}, line))),
      m.explanation ? arithmetic(m.explanation, m.score) : null,
      openButton(m.uri))))
      : notice("info", "no results: the trace below says why"),
    answer.query_plan ? planView(answer.query_plan) : h("p", { class: "muted plan" }, "no plan: find runs the query as written"),
    h("section", { class: "traces" }, h("h3", {}, "trace"),
      (answer.provenance || []).map((p, i) => traceFigure(p, i))));
}

const RULES = {
  weighted_sum: "the sum of weight × score",
  noisy_or: "1 − the product of (1 − weight × score): found by several, it ranks above each alone",
  max: "the largest weight × score",
  min: "the smallest weight × score",
};

/** The arithmetic of a score, as the answer carries it: the formula with its numbers, then each
 * arm (its score, its weight, what it is) and, nested, how an arm's own score was combined. */
function arithmetic(ex, shown) {
  return h("div", { class: "arithmetic", "data-rule": ex.rule, "data-score": shown },
    h("p", { class: "formula" }, h("code", {}, `${fmt(shown)} = ${formula(ex)}`), " ",
      h("span", { class: "muted" }, [ex.note, RULES[ex.rule] || ex.rule].filter(Boolean).join(": "))),
    h("ul", { class: "terms" }, ex.terms.map((t) => h("li", { class: "term", "data-score": t.score, "data-weight": t.weight },
      h("code", {}, `${fmt(t.score, 6)} × ${fmt(t.weight, 4)}`), ` ${t.label}`,
      t.explanation ? arithmetic(t.explanation, t.score) : null))));
}

function formula(ex) {
  const parts = ex.terms.map((t) => `${fmt(t.score)}×${fmt(t.weight, 2)}`);
  if (ex.rule === "weighted_sum") return parts.join(" + ");
  if (ex.rule === "noisy_or") return "1 − " + parts.map((p) => `(1 − ${p})`).join("·");
  return `${ex.rule}(${parts.join(", ")})`;
}

/** Opens the result's document (a folder: the folder) in the tree pane. */
function openButton(uri) {
  const button = h("button", { type: "button", class: "link open-doc", "data-uri": uri }, "open in the tree");
  button.addEventListener("click", () => open("tree", { uri }));
  return button;
}

function planView(plan) {
  return h("section", { class: "plan" },
    h("h3", {}, "plan"),
    h("p", {}, h("span", { class: "badge" }, `planner ${plan.planner}`),
      plan.fallback ? h("span", { class: "badge warn" }, `fell back: ${plan.fallback_reason || "yes"}`) : null),
    h("p", { class: "reasoning" }, plan.reasoning || "(the planner gave no reasoning)"),
    h("div", { class: "table-scroll" }, h("table", {}, h("thead", {}, h("tr", {}, ["#", "typed query", "type", "intent", "priority", "scope"].map((c) => h("th", {}, c)))),
      h("tbody", {}, (plan.queries || []).map((q, i) => h("tr", {},
        h("td", {}, i + 1), h("td", {}, q.query), h("td", {}, q.context_type || "any"), h("td", {}, q.intent || ""),
        h("td", {}, q.priority), h("td", {}, (q.target_uris || []).length ? q.target_uris.map(shortUri).join(", ") : "every root it may see")))))));
}

function contextView(answer) {
  return h("div", { class: "answer" },
    h("h3", {}, `context: ${answer.tokens} of ${answer.budget_tokens} tokens`),
    h("pre", { class: "text context-text" }, answer.text || "(empty)"),
    h("h4", {}, "passages"),
    h("ol", { class: "results" }, (answer.passages || []).map((p) => h("li", { class: "result", "data-uri": p.uri || "" },
      h("p", {}, p.score !== undefined ? h("span", { class: "score" }, fmt(p.score)) : null, " ", h("code", {}, p.uri || ""),
        p.citation ? h("span", { class: "citation" }, ` — ${citationText(p.citation)}`) : null),
      h("p", { class: "abstract" }, p.text || p.abstract || "")))),
    answer.query_plan ? planView(answer.query_plan) : null);
}
