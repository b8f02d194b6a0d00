// The live state every view reads: cluster objects, bindings (list, then watch) and the
// monitor's realtime view (a watch stream). Views subscribe; nothing polls.

export const CLUSTERS = "/apis/multicluster.io/v1alpha1/clusters";
export const BINDINGS = "/apis/multicluster.io/v1alpha1/bindings";
const REALTIME = "/api/v1/monitor/realtime?watch=true&timeoutSeconds=1800";
const WATCH_SECONDS = 600;

class Topic {
  constructor() { this.listeners = new Set(); this.pending = false; this.failed = false; }

  // After an interruption: tell the page the stream is back (onError(null)).
  recovered() {
    if (!this.failed) return;
    this.failed = false;
    this.onError(null);
  }

  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  // Coalesce a burst of events into one notification per animation frame.
  notify() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      for (const fn of [...this.listeners]) fn();
    });
  }
}

// Objects of one kind kept current by list + watch, relisting when the watch expires (410).
export class ObjectSet extends Topic {
  constructor(session, path, onError) {
    super();
    this.session = session;
    this.path = path;
    this.onError = onError;
    this.items = new Map();
    this.loaded = false;
  }

  async run(signal) {
    let rv = null;
    let backoff = 500;
    while (!signal.aborted) {
      try {
        if (rv === null) {
          const list = await this.session.get(this.path);
          this.items = new Map(list.items.map((o) => [o.metadata.name, o]));
          rv = list.metadata.resourceVersion;
          if (!this.loaded) performance.mark(`drods:listed ${this.path}`); // for bench/ui.py
          this.loaded = true;
          this.recovered();
          this.notify();
        }
        const url = `${this.path}?watch=true&resourceVersion=${rv}&timeoutSeconds=${WATCH_SECONDS}`;
        for await (const event of this.session.lines(url, signal)) {
          if (event.type === "ERROR") { rv = null; break; }
          const obj = event.object;
          if (event.type === "DELETED") this.items.delete(obj.metadata.name);
          else this.items.set(obj.metadata.name, obj);
          rv = obj.metadata.resourceVersion;
          this.notify();
        }
        backoff = 500;
      } catch (err) {
        if (signal.aborted) return;
        this.failed = true;
        this.onError(err);
        if (err.status === 401) return;
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, 10_000);
        rv = null;
      }
    }
  }
}

class Realtime extends Topic {
  constructor(session, onError) {
    super();
    this.session = session;
    this.onError = onError;
    this.body = null;
    this.receivedAt = 0;
  }

  async run(signal) {
    let backoff = 500;
    while (!signal.aborted) {
      try {
        for await (const body of this.session.lines(REALTIME, signal)) {
          if (!this.body) performance.mark("drods:realtime first line");
          this.body = body;
          this.receivedAt = performance.now();
          this.recovered();
          this.notify();
          backoff = 500;
        }
      } catch (err) {
        if (signal.aborted) return;
        this.failed = true;
        this.onError(err);
        if (err.status === 401) return;
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, 10_000);
      }
    }
  }

  cluster(name) {
    return this.body && this.body.clusters ? this.body.clusters[name] || null : null;
  }

  // Seconds since the cluster's last report, advanced locally between stream lines.
  reportAge(name) {
    const c = this.cluster(name);
    if (!c || c.reportAgeSeconds === null || c.reportAgeSeconds === undefined) return null;
    return c.reportAgeSeconds + (performance.now() - this.receivedAt) / 1000;
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

export class Live {
  constructor(session, onError) {
    this.controller = new AbortController();
    this.clusters = new ObjectSet(session, CLUSTERS, onError);
    this.bindings = new ObjectSet(session, BINDINGS, onError);
    this.realtime = new Realtime(session, onError);
  }

  start() {
    const signal = this.controller.signal;
    this.realtime.run(signal); // first: the smallest answer, and what the fleet view waits for
    this.clusters.run(signal);
    this.bindings.run(signal);
    return this;
  }

  stop() { this.controller.abort(); }
}

// Helpers over the objects.

export function ready(cluster) {
  const c = ((cluster.status || {}).conditions || []).find((x) => x.type === "Ready");
  return c ? c.status : "Unknown";
}

export function placementOf(binding) {
  return ((binding.status || {}).placement || []).filter((p) => (p.replicas || 0) > 0);
}

// Bindings with replicas placed on ``cluster`` or a copy still there.
export function bindingsOn(bindings, cluster) {
  const out = [];
  for (const b of bindings.values()) {
    const st = b.status || {};
    const placed = placementOf(b).find((p) => p.cluster === cluster);
    const copy = (st.clusters || []).find((c) => c.cluster === cluster);
    if (placed || copy) out.push({ binding: b, placed: placed ? placed.replicas : 0, copy });
  }
  return out.sort((a, b) => a.binding.metadata.name.localeCompare(b.binding.metadata.name));
}
