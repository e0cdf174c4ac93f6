// What every pane shares: the API client of the connected key and who that key is (GET /v1/me).

import { Disconnected } from "./api.js";

// ``api`` is never null: with no key connected it is a ``Disconnected`` client, whose calls fail with a sentence
export const ctx = { api: new Disconnected(), me: null, panes: {} };
