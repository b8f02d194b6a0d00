"""What-if simulator benchmark: one scenario through the policies, timed, with its figures.

    python bench/whatif.py [--scenario examples/scenarios/fleet-100.yaml] [--policies …] [--seed N] [--out DIR]

Prints the conditions (clusters, ticks, workload events, policies, machine), the wall time of
preparing the inputs, of each policy's run and of the report, then one JSON line with
``scenario, clusters, ticks, workload_events, policies, wall_s, budget_s, within_budget, figures``
and WaterLevel's comparison against each baseline. Budgets (issue 16): 60 s for the 100-cluster
day, 600 s for the 1,000-cluster one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drods.errors import ApiError  # noqa: E402
from drods.whatif.engine import PolicyRun, prepare  # noqa: E402
from drods.whatif.policies import make_policy, parse_policies  # noqa: E402
from drods.whatif.report import write_report  # noqa: E402
from drods.whatif.scenario import load_scenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default=str(ROOT / "examples/scenarios/fleet-100.yaml"))
    ap.add_argument("--policies", default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None, help="report folder (default: a temporary one)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    try:
        names = parse_policies(args.policies)
        scn, base = load_scenario(args.scenario)
    except (ApiError, ValueError) as e:  # the product's own words: one line, as `drods simulate` says them
        ap.error(str(getattr(e, "message", None) or e))
    inputs = prepare(scn, args.seed, base)
    t_prep = time.perf_counter() - t0
    print(f"# conditions: scenario {scn.name}, {inputs.fleet.n} clusters, {scn.ticks} ticks of "
          f"{scn.tickMinutes:g} min, "
          f"{len(inputs.workloads)} workload events, {len(inputs.events)} fleet events, seed {inputs.seed}")
    print(f"# machine: {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cpus, "
          f"{platform.machine()}")
    print(f"#   prepare: {t_prep:.2f}s")
    traces = {}
    for name in names:
        traces[name] = PolicyRun(inputs, make_policy(name)).run()
        tr = traces[name]
        print(f"#   {name}: {tr.wall_s:.2f}s, {tr.decisions} scheduling cycles "
              f"({tr.wall_s / max(1, tr.decisions) * 1e3:.3f} ms per cycle incl. the loop)")
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        summary = write_report(out, inputs, traces)
    t_report = time.perf_counter() - t1
    wall = time.perf_counter() - t0
    budget = 60.0 if inputs.fleet.n <= 100 else 600.0
    print(f"#   report: {t_report:.2f}s; total {wall:.2f}s (budget {budget:.0f}s)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"scenario": scn.name, "clusters": inputs.fleet.n, "ticks": scn.ticks,
                      "workload_events": len(inputs.workloads), "policies": names, "wall_s": round(wall, 2),
                      "budget_s": budget, "within_budget": wall <= budget, "peak_rss_mb": round(rss, 1),
                      "figures": summary["policies"], "comparison": summary.get("comparison")}))


if __name__ == "__main__":
    main()
