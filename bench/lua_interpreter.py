"""Cost of Karmada Lua interpreter hooks: one sandboxed call per operation the controllers make (a
fresh interpreter each call), and how long a runaway script holds the caller before it is stopped.

    python bench/lua_interpreter.py [--calls 2000]

Prints the conditions, the figures, and a final JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.arguments import positive_int  # noqa: E402
from drods.model.lua_customization import LuaCustomization  # noqa: E402
from drods.model.lua_sandbox import LuaScriptError  # noqa: E402

SCRIPTS = {
    "replicaResource": 'local kube = require("kube")\nfunction GetReplicas(obj)\n'
                       "  return obj.spec.replicas, kube.accuratePodRequirements(obj.spec.template)\nend",
    "replicaRevision": "function ReviseReplica(obj, n)\n  obj.spec.replicas = n\n  return obj\nend",
    "healthInterpretation": "function InterpretHealth(o)\n  return o.status.readyReplicas == o.spec.replicas\nend",
}


def workload() -> dict[str, object]:
    containers = [{"name": f"c{i}", "image": "app:1", "env": [{"name": f"E{j}", "value": "x"} for j in range(10)],
                   "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}} for i in range(3)]
    return {"apiVersion": "apps.example.org/v1", "kind": "Server", "metadata": {"name": "s", "namespace": "d"},
            "spec": {"replicas": 6, "template": {"metadata": {"labels": {"app": "s"}},
                                                 "spec": {"containers": containers}}},
            "status": {"readyReplicas": 6}}


def timed(fn: object, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=positive_int, default=2000)
    args = ap.parse_args()
    lua = LuaCustomization("bench", SCRIPTS)
    obj = workload()
    print(f"conditions: python {platform.python_version()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}, "
          f"{args.calls} calls per operation, object of {len(json.dumps(obj))} bytes")
    figures: dict[str, float] = {}
    for name, call in (("GetReplicas", lambda: lua.get_replicas(obj)),
                       ("ReviseReplica", lambda: lua.revise_replica(obj, 3)),
                       ("InterpretHealth", lambda: lua.interpret_health(obj))):
        ms = timed(call, args.calls)
        figures[f"{name}_p50_ms"] = round(statistics.median(ms), 3)
        figures[f"{name}_p99_ms"] = round(sorted(ms)[int(0.99 * len(ms))], 3)
        print(f"{name}: p50 {figures[f'{name}_p50_ms']} ms, p99 {figures[f'{name}_p99_ms']} ms")
    runaway = LuaCustomization("runaway", {"replicaRevision": "function ReviseReplica(o, n) while true do end end"})
    t = time.perf_counter()
    try:
        runaway.revise_replica(obj, 1)
    except LuaScriptError as e:
        figures["runaway_stopped_ms"] = round((time.perf_counter() - t) * 1000, 1)
        print(f"runaway ReviseReplica stopped after {figures['runaway_stopped_ms']} ms: {e}")
    print(json.dumps({"bench": "lua_interpreter", "calls": args.calls, **figures}))


if __name__ == "__main__":
    main()
