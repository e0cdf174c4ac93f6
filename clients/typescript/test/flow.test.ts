// One agent's flow through the generated client against a running `cairn serve`
// (CAIRN_URL, CAIRN_KEY; tests/e2e/test_clients.py starts the server and runs this).
import assert from "node:assert/strict";
import { test } from "node:test";

import * as cairn from "../src";

const url = process.env.CAIRN_URL ?? "";
const key = process.env.CAIRN_KEY ?? "";
const ROOT = "cairn://resources/handbook";

const client = cairn.cairnClient(url, key);
let sessionId = "";

test("documents, find, search with a session, remember, commit", { skip: !url && "CAIRN_URL is not set" }, async () => {
  const put = await cairn.putDocuments({ client, throwOnError: true, body: { root_uri: ROOT, documents: [
    { path: "billing/refunds.md", text: "# Refunds\n\nRefunds reach the card within five business days." },
    { path: "people/leave.md", text: "# Leave\n\nEveryone has 28 days of paid annual leave a year." },
  ] } });
  assert.equal(put.data.documents, 2);

  const found = await cairn.find({ client, throwOnError: true, body: { query: "how long do refunds take?", limit: 3 } });
  assert.ok((found.data.resources ?? []).some((m) => m.uri === `${ROOT}/billing/refunds.md`));

  const session = await cairn.createSession({ client, throwOnError: true, body: { user: "ann" } });
  assert.equal(session.response.status, 201);
  sessionId = session.data.id;
  const message = await cairn.appendMessage({ client, throwOnError: true, path: { session_id: sessionId },
    headers: { "idempotency-key": "flow-1" }, body: { role: "user", content: "I paid by card last week." } });
  assert.equal(message.response.status, 201);

  const searched = await cairn.search({ client, throwOnError: true,
    body: { query: "can I get my money back?", session_id: sessionId } });
  assert.ok((searched.data.resources ?? []).some((m) => m.uri === `${ROOT}/billing/refunds.md`));

  const remembered = await cairn.remember({ client, throwOnError: true,
    body: { user: "ann", text: "Ann prefers refunds to her card.", category: "preferences", key: `refunds-${Date.now()}` } });
  assert.equal(remembered.response.status, 201);

  const committed = await cairn.commitSession({ client, throwOnError: true, path: { session_id: sessionId } });
  assert.ok((committed.data.messages ?? 0) >= 1);

  const refused = await cairn.find({ client: cairn.cairnClient(url, "not-a-key-0123456789"), body: { query: "refunds" } });
  assert.equal(refused.response.status, 401);
  assert.equal(refused.error?.error, "unauthorized");
});

const sdk = cairn as Record<string, unknown>;
const noContext = typeof sdk.context !== "function"
  && "POST /v1/context is not in docs/openapi.json yet (issue-20's route): the flow stops after commit";

test("context", { skip: !url ? "CAIRN_URL is not set" : noContext }, async () => {
  assert.ok(sessionId, "the flow above made a session");
  const context = await (sdk.context as (o: unknown) => Promise<{ data: { text: string; tokens: number } }>)({
    client, throwOnError: true, body: { query: "how do refunds work?", session_id: sessionId, budget_tokens: 400 } });
  assert.ok(context.data.text.includes("five business days") && context.data.tokens <= 400);
});
