// `npm run generate`: src/generated/ from the repository's OpenAPI document (committed; never edited by hand)
import { defineConfig } from "@hey-api/openapi-ts";

export default defineConfig({
  input: "../../docs/openapi.json",
  output: { path: "src/generated" },
  plugins: ["@hey-api/client-fetch", "@hey-api/typescript", "@hey-api/sdk"],
});
