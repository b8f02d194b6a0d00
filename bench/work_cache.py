"""What the member controllers' cache of Works weighs, per Work, by how it keeps them.

    python bench/work_cache.py [--works 20000] [--clusters 100]

Builds ``--works`` Works as the binding controller writes them (a Deployment with a ConfigMap
dependent, planned by `drods.controllers.manifests.plan` for one cluster each, ownership metadata and
all) with the status the execution controller leaves on an applied one (the member's Deployment
status), stores nothing, and measures with tracemalloc what a cache of all of them holds when each
is kept

- ``decoded``: as the whole decoded document (what the shared informer kept before);
- ``record``: as a `WorkRecord` (no manifests; they are read from the store when needed);
- ``record_lz4``: as a `WorkRecord` plus its manifests LZ4-compressed (the alternative that needs no
  store read to apply a Work).

Prints the conditions, then one JSON line with bytes per Work and µs per decode of each.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cramjam

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_int  # noqa: E402
from drods.controllers import manifests as M  # noqa: E402
from drods.controllers.execution import manifest_status  # noqa: E402
from drods.controllers.work_record import decode_work  # noqa: E402
from drods.model import jsondoc  # noqa: E402
from drods.model.kinds import WORK  # noqa: E402
from drods.model.timefmt import rfc3339, rfc3339_ms  # noqa: E402
from drods.model.work import WorkStatus, work_labels, work_name  # noqa: E402
from drods.registry.objects import decode_stored  # noqa: E402
from drods.store import KeyValue  # noqa: E402


def _template(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    ns, name = f"team-{i % 50}", f"app-{i:06d}"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config", "namespace": ns,
                                                                 "generation": 1},
          "data": {"LOG_LEVEL": "info", "FEATURE_FLAGS": "a,b,c", "UPSTREAM": f"http://{name}-backend:8080"}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": name, "namespace": ns, "generation": 1, "labels": {"app": name}},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                       "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                           {"name": "main", "image": "registry.example.com/shop/web:1.4.2",
                            "envFrom": [{"configMapRef": {"name": f"{name}-config"}}],
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}}}
    return deploy, cm


def stored_works(works: int, clusters: int) -> list[KeyValue]:
    """Each Work's stored bytes, as the binding controller and then the execution controller left them."""
    out: list[KeyValue] = []
    now = time.time()
    for i in range(works):
        deploy, cm = _template(i)
        cluster, binding = f"cluster-{i % clusters:05d}", f"{deploy['metadata']['name']}-deployment"
        rs = f"ReplicaSet \"{deploy['metadata']['name']}-5d8f7c\" has successfully progressed."
        p = M.plan(binding, f"uid-{i}", deploy, [M.Target(cluster, 2, {})], [cm], [])[cluster]
        assert isinstance(p, M.ManifestSet)
        member = {**p.manifests[-1], "status": {
            "observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                            "message": "Deployment has minimum availability."},
                           {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                            "message": rs}]}}
        status = WorkStatus(observedHash=p.hash, applied=True, appliedTime=rfc3339_ms(now),
                            manifests=[manifest_status(member, rfc3339(now))])
        name = work_name(binding, cluster)
        doc = {"apiVersion": WORK.api_version, "kind": WORK.kind,
               "metadata": {"name": name, "uid": f"w-{i}", "generation": 1, "creationTimestamp": rfc3339(now),
                            "labels": work_labels(binding, cluster), "finalizers": ["multicluster.io/execution"],
                            "annotations": {"multicluster.io/leader-generation": "3"}},
               "spec": {"cluster": cluster, "binding": binding, "manifests": p.manifests, "hash": p.hash},
               "status": status.model_dump(exclude_defaults=True)}
        out.append(KeyValue(WORK.key(name), jsondoc.dumps(doc), i + 1, i + 1, 1, 0))
    return out


def _with_lz4(kv: KeyValue) -> tuple[Any, bytes]:
    manifests = jsondoc.loads(kv.value)["spec"]["manifests"]
    return decode_work(kv), bytes(cramjam.lz4.compress_block(jsondoc.dumps(manifests)))


def weigh(kvs: list[KeyValue], keep: Callable[[KeyValue], Any]) -> tuple[float, float]:
    """(bytes held per Work, µs per decode) of a cache keeping ``keep(kv)`` for every Work; the time
    is taken on a pass of its own, without tracemalloc."""
    gc.collect()
    started = time.perf_counter()
    cache = {kv.key: keep(kv) for kv in kvs}
    took = time.perf_counter() - started
    del cache
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    cache = {kv.key: keep(kv) for kv in kvs}
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del cache
    return held / len(kvs), 1e6 * took / len(kvs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--works", type=positive_int, default=20_000)
    ap.add_argument("--clusters", type=positive_int, default=100)
    args = ap.parse_args(argv)
    kvs = stored_works(args.works, args.clusters)
    stored = sum(len(kv.value) for kv in kvs) / len(kvs)
    out: dict[str, Any] = {"works": args.works, "stored_bytes_per_work": round(stored)}
    for label, keep in (("decoded", decode_stored), ("record", decode_work), ("record_lz4", _with_lz4)):
        per_work, us = weigh(kvs, keep)
        out[f"{label}_bytes_per_work"] = round(per_work)
        out[f"{label}_us_per_decode"] = round(us, 1)
    print(f"# conditions: {args.works} Works (Deployment + ConfigMap, applied, member status), "
          f"{args.clusters} clusters, bytes by tracemalloc, decode time on a pass without it, "
          f"python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
