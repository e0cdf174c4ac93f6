// The cairn /v1 client: everything generated from docs/openapi.json (src/generated, never edited),
// plus `cairnClient`, which points a client at a server with an API key or a token.
import { createClient, createConfig } from "./generated/client";
import type { Client } from "./generated/client";

export * from "./generated";
export type { Client };

/** A client of the cairn API at `baseUrl` (e.g. http://127.0.0.1:8080), authenticated with `apiKey`. */
export function cairnClient(baseUrl: string, apiKey: string): Client {
  return createClient(createConfig({ baseUrl, auth: () => apiKey }));
}
