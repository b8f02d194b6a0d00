// Talking to the API with the token the user typed (kept in sessionStorage: gone with the tab).

const KEY = "drods.token";
const WRITERS = new Set(["admin", "operator"]);

export class ApiError extends Error {
  constructor(status, body) {
    // DRO-DS's errors carry a string code; a Kubernetes Status carries the HTTP status as its code, and a reason
    const code = body && (typeof body.code === "string" ? body.code : body.reason) || "";
    super(body && body.message ? `${body.message} (${status}${code ? ` ${code}` : ""})` : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

// The role claim of a JWT, read without verifying it: the server verifies every call, the UI
// uses the claim only to leave out buttons a role may not use.
export function claims(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
  } catch {
    return null;
  }
}

// The token itself, or a kubeconfig pasted whole (a password field drops its line breaks):
// then the first user's `token:`.
export function tokenOf(text) {
  if (/^[\w-]+\.[\w-]+\.[\w-]*$/.test(text)) return text;
  const m = text.match(/\btoken:\s*["']?([\w-]+\.[\w-]+\.[\w-]*)/);
  return m ? m[1] : text;
}

export class Session {
  constructor(token) {
    this.token = token;
    const c = claims(token) || {};
    this.role = c.role || "";
    this.subject = c.sub || "";
    this.namespaces = Array.isArray(c.namespaces) ? c.namespaces : null;  // a tenant's token
  }

  static restore() {
    const token = sessionStorage.getItem(KEY);
    return token ? new Session(token) : null;
  }

  save() { sessionStorage.setItem(KEY, this.token); }
  static clear() { sessionStorage.removeItem(KEY); }

  get canWrite() { return WRITERS.has(this.role); }
  get isAdmin() { return this.role === "admin"; }

  async fetch(path, init = {}) {
    const headers = { Accept: "application/json", ...(init.headers || {}), Authorization: `Bearer ${this.token}` };
    const resp = await fetch(path, { ...init, headers });
    if (!resp.ok) {
      let body = null;
      try { body = await resp.json(); } catch { /* not JSON */ }
      throw new ApiError(resp.status, body);
    }
    return resp;
  }

  async get(path, params) {
    const query = params ? `?${new URLSearchParams(params)}` : "";
    return (await this.fetch(path + query)).json();
  }

  async post(path, body) {
    const resp = await this.fetch(path, {
      method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" },
    });
    return resp.json();
  }

  async mergePatch(path, body) {
    const resp = await this.fetch(path, {
      method: "PATCH", body: JSON.stringify(body), headers: { "Content-Type": "application/merge-patch+json" },
    });
    return resp.json();
  }

  // One JSON object per line of a streaming answer (Kubernetes watch, realtime watch).
  async *lines(path, signal) {
    const resp = await this.fetch(path, { signal });
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (line) yield JSON.parse(line);
      }
    }
    if (buffer.trim()) yield JSON.parse(buffer);
  }
}
