// What every pane shares: the API client of the connected key and who that key is (GET /v1/me).

export const ctx = { api: null, me: null, panes: {} };
