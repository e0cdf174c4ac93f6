// The TypeScript a user copies runs as written: every ```ts block of this package's README and of
// docs/integrations/typescript.md, one program per page, type-checked against the client's sources
// and run with Node against the server named by CAIRN_URL and CAIRN_KEY (tests/e2e/test_clients.py
// starts `cairn serve` and runs `npm test`).
//
// A page's blocks share one scope, in order, as a reader following the page would write them. The
// one thing a page leaves to its reader, `model` (a Vercel AI SDK language model, e.g. openai("gpt-4.1")),
// is here the AI SDK's own mock model from `ai/test`, scripted to call the tool it is offered and
// then answer with what the tool returned: so the answer holds only what crossed the tool call.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import ts from "typescript";

const PACKAGE = path.resolve(__dirname, "..", "..");  // dist/test -> the package folder
const PAGES = [path.join(PACKAGE, "README.md"), path.resolve(PACKAGE, "..", "..", "docs", "integrations", "typescript.md")];
const url = process.env.CAIRN_URL ?? "";
const PRINTS: Record<string, string[]> = {  // what each page's code prints, at least
  README: ["cairn://resources/handbook/billing/refunds.md"],
  typescript: ["cairn://resources/handbook/billing/refunds.md", "From cairn:", "five business days"],
};

// What the page leaves to the reader. `model` calls the first tool it is given with the user's
// question, then answers "From cairn: <what the tool returned>".
const READER = `
import { MockLanguageModelV3 } from "ai/test";
import type { LanguageModelV3CallOptions } from "@ai-sdk/provider";

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
                 outputTokens: { total: 1, text: 1, reasoning: 0 } };
function scripted(options: LanguageModelV3CallOptions) {
  const last = options.prompt[options.prompt.length - 1];
  if (last.role === "tool") {
    const result = last.content.find((part) => part.type === "tool-result");
    const output = result?.type === "tool-result" ? result.output : undefined;
    const text = output && "value" in output ? (typeof output.value === "string" ? output.value : JSON.stringify(output.value)) : "";
    return { content: [{ type: "text" as const, text: "From cairn: " + text }], usage, warnings: [],
             finishReason: { unified: "stop" as const, raw: "stop" } };
  }
  assert.equal(last.role, "user", "a turn is the user's or a tool's");
  const question = last.content.map((part) => (part.type === "text" ? part.text : "")).join(" ");
  const tool = (options.tools ?? [])[0];
  assert.ok(tool, "the model was offered a tool");
  return { content: [{ type: "tool-call" as const, toolCallId: "call-1", toolName: tool.name, input: JSON.stringify({ query: question }) }],
           usage, warnings: [], finishReason: { unified: "tool-calls" as const, raw: "tool_calls" } };
}
const model = new MockLanguageModelV3({ doGenerate: async (options) => scripted(options) });
`;

function blocks(page: string): string[] {
  const text = readFileSync(page, "utf-8");
  return [...text.matchAll(/^```(?:ts|typescript)\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/** One program of the page's blocks: their imports on top, the rest inside an async main(). */
function program(page: string): string {
  const source = ts.createSourceFile("page.ts", READER + blocks(page).join("\n"), ts.ScriptTarget.ES2022, true);
  const imports = source.statements.filter(ts.isImportDeclaration).map((s) => s.getText(source));
  const body = source.statements.filter((s) => !ts.isImportDeclaration(s)).map((s) => s.getText(source));
  return [`import assert from "node:assert/strict";`, ...imports, "", "async function main(): Promise<void> {",
    ...body, "}", "", "main().catch((error) => { console.error(error); process.exit(1); });", ""].join("\n");
}

function typeErrors(file: string): string[] {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts"], types: ["node"], typeRoots: [path.join(PACKAGE, "node_modules", "@types")], strict: true, noEmit: true, skipLibCheck: true,
    esModuleInterop: true, baseUrl: PACKAGE, paths: { "cairn-context-client": ["./src/index.ts"] },
  };
  const checked = ts.createProgram([file], options);
  return ts.getPreEmitDiagnostics(checked).map((d) => {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    return `${d.file ? path.basename(d.file.fileName) : ""}:${where ? where.line + 1 : "?"} ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
  });
}

for (const page of PAGES) {
  const name = path.basename(page, ".md");
  test(`${path.relative(path.resolve(PACKAGE, "..", ".."), page)} runs as written`, { skip: !url && "CAIRN_URL is not set" }, () => {
    assert.ok(blocks(page).length > 0, `${page} has no ts block`);
    const folder = path.join(PACKAGE, "dist", "pages");  // inside the package: `cairn-context-client` resolves to itself
    mkdirSync(folder, { recursive: true });
    const file = path.join(folder, `${name}.ts`);
    writeFileSync(file, program(page));
    const errors = typeErrors(file);
    assert.deepEqual(errors, [], `${page} does not type-check (${file}):\n${errors.join("\n")}`);
    const js = ts.transpileModule(readFileSync(file, "utf-8"), { compilerOptions: {
      target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS, esModuleInterop: true } }).outputText;
    writeFileSync(path.join(folder, `${name}.js`), js);
    const run = spawnSync(process.execPath, [path.join(folder, `${name}.js`)], { encoding: "utf-8", timeout: 120_000 });
    assert.equal(run.status, 0, `${page} failed:\n${run.stdout}\n${run.stderr}`);
    for (const expected of PRINTS[name]) {
      assert.ok(run.stdout.includes(expected), `${page} did not print ${JSON.stringify(expected)}:\n${run.stdout}`);
    }
  });
}
