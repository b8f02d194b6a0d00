"""Kill campaign: SIGKILL a random process of a real fleet at a random instant, again and again, while
Deployments with a PropagationPolicy are created, scaled and deleted through two API servers.

The fleet: a 3-member etcd, ``drods apiserver`` ×2, ``drods scheduler``, ``drods controllers`` and three
``drods sim`` members. Each round kills one process (kinds: apiserver, scheduler, controllers, etcd;
shuffled, ``--kills-per-kind`` of each), restarts it, stops the writer and waits until every
acknowledged write is served, every Binding is placed, every placement has exactly one Work and
every member holds exactly what its Works say (the round's convergence time). What is measured and
how: ``tests/ha_e2e/chaos.py``.

Prints the conditions, one line per round and a final JSON line
``{kills, lost_writes, orphans, duplicates, converge_s_p99, …}``.

    python bench/chaos.py --kills-per-kind 20 --seed 1 --time-limit 3000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scratch import scratch_dir  # noqa: E402
from tests.ha_e2e.chaos import KINDS, campaign, fleet  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills-per-kind", type=int, default=20)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, of " + ",".join(KINDS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=3600.0, help="seconds; no new round starts after it")
    ap.add_argument("--converge-timeout", type=float, default=90.0, help="seconds a round may take to converge")
    ap.add_argument("--lease-ttl", type=int, default=3)
    ap.add_argument("--dir", help="keep the fleet's data and logs here (default: a temporary dir)")
    args = ap.parse_args()
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not kinds or not set(kinds) <= set(KINDS):
        ap.error(f"--kinds {args.kinds}: each of {', '.join(KINDS)}")
    print(f"conditions: python {platform.python_version()}, {os.cpu_count()} cores, {platform.platform()}; "
          f"kinds {kinds} x {args.kills_per_kind}, seed {args.seed}, time limit {args.time_limit:g}s, "
          f"converge timeout {args.converge_timeout:g}s, lease TTL {args.lease_ttl}s", flush=True)
    root = Path(args.dir) if args.dir else scratch_dir("drods-chaos-")
    started = time.monotonic()
    with fleet(root, lease_ttl=args.lease_ttl) as fl:
        print(f"fleet up in {time.monotonic() - started:.1f}s ({root})", flush=True)
        t0 = time.monotonic()
        res, writer = campaign(fl, kills_per_kind=args.kills_per_kind, seed=args.seed, time_limit=args.time_limit,
                               converge_timeout=args.converge_timeout, kinds=kinds,
                               log=lambda s: print(s, flush=True))
        summary = res.summary(writer, time.monotonic() - t0)
    for what in ("lost", "orphans", "duplicates", "unconverged"):
        for line in getattr(res, what)[:20]:
            print(f"{what}: {line}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
