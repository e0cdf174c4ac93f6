// The /v1 API with the caller's key: the console's only way to cairn.

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.error) || "http_error";
    this.details = (body && body.details) || null;
    this.requestId = (body && body.request_id) || null;
  }

  /** The server has no such route: an older cairn, or a route still to land. */
  get unavailable() {
    return this.status === 404 && this.code === "route_not_found";
  }
}

// what a retired key's calls resolve to: a promise that never settles, so the code awaiting it stops there
const NEVER = new Promise(() => {});

export class Api {
  constructor(baseUrl, key) {
    this.base = String(baseUrl || "").replace(/\/+$/, "");
    this.key = key || "";
    this.retired = false;
  }

  /** Another key was connected: what this key still had in flight is dropped, never shown. */
  retire() {
    this.retired = true;
  }

  async call(method, path, { query, body } = {}) {
    let data;
    try {
      data = await this.send(method, path, { query, body });
    } catch (err) {
      if (this.retired) return NEVER;
      throw err;
    }
    return this.retired ? NEVER : data; // no pane writes the old key's answer, or its error
  }

  async send(method, path, { query, body } = {}) {
    const url = new URL(this.base + path);
    for (const [name, value] of Object.entries(query || {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
    }
    const headers = { accept: "application/json" };
    if (this.key) headers.authorization = `Bearer ${this.key}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let response;
    try {
      response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      throw new ApiError(0, { error: "network_error", message: `cannot reach ${this.base}: ${err.message}` });
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = { message: text.slice(0, 300) };
    }
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }

  get(path, query) {
    return this.call("GET", path, { query });
  }

  post(path, body) {
    return this.call("POST", path, { body });
  }

  put(path, body) {
    return this.call("PUT", path, { body });
  }

  delete(path, query) {
    return this.call("DELETE", path, { query });
  }
}

/** The client of no key: every call fails with the sentence a pane shows in its place. */
export class Disconnected {
  call() {
    return Promise.reject(new ApiError(0, {
      error: "not_connected", message: "no API key is connected: enter the key and press Connect, then try again" }));
  }

  get() { return this.call(); }

  post() { return this.call(); }

  put() { return this.call(); }

  delete() { return this.call(); }

  retire() {}
}

/** The message to show for an error: cairn's own words, with the request id to quote. */
export function describe(err) {
  if (!(err instanceof ApiError)) return String(err && err.message ? err.message : err);
  const id = err.requestId ? ` (request ${err.requestId})` : "";
  return `${err.status ? err.status + " " : ""}${err.code}: ${err.message}${id}`;
}

export const UNAVAILABLE = "not available on this server: its cairn has no such route yet";

/** Whether the key may run an operation: GET /v1/me's "can"; a server without it decides per request. */
export function may(me, operation) {
  return !me || !Array.isArray(me.can) || me.can.includes(operation);
}
