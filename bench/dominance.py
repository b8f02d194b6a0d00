"""The default policy against Karmada's over many runs: which it Pareto-dominates, and its gap to the ideal.

    python bench/dominance.py [--runs all|shipped|seeds|variants|NAME[:SEED],…] [--autoops JSON]
                              [--plugin-args JSON] [--workers 2] [--cache DIR]

The runs (``--runs``, default ``all``): the shipped scenarios (``examples/scenarios/*.yaml``) as shipped
(``shipped``); diurnal-fleet, regional-failure, flash-crowd, trace-replay and overload with seeds 11–13 and
fleet-100 with 11–12 (``seeds``); the variants (``examples/scenarios/variants/*.yaml``, ``variants``); or
named ones (``trace-replay:12,small-fleet``). fleet-1000 is in ``shipped`` only (~2 min a policy run).

WaterLevel runs with the scenario's ``autoops`` updated by ``--autoops`` and its ``pluginArgs`` by
``--plugin-args`` (JSON objects: a setting is tried on every run without editing a file); the Karmada
baselines do not read either, so with ``--cache DIR`` each baseline's figures are kept there, keyed by the
scenario file's content, the seed and the policy (delete the folder when the baselines' code changes).
Dominance is `drods.whatif.report.dominance`, as ``summary.json`` states it.

Prints the conditions, one line per run (``peak_gap_mean``, replicas moved, cross-domain GiB, water-level and
latency breaches, the figures it loses on, each with the best baseline's value), then one JSON line with
``runs``, ``dominating`` (runs dominating every baseline), ``gap_over_0_03`` (runs whose ``peak_gap_mean`` is
above the goal), ``autoops``, ``plugin_args`` and ``per_run``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import positive_int  # noqa: E402
from drods.whatif.engine import PolicyRun, prepare  # noqa: E402
from drods.whatif.policies import make_policy  # noqa: E402
from drods.whatif.report import dominance, figures  # noqa: E402
from drods.whatif.scenario import Scenario, load_scenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "examples" / "scenarios"
BASELINES = ("AvailableReplicas", "Static", "Aggregated")
SEEDED = {"diurnal-fleet": (11, 12, 13), "regional-failure": (11, 12, 13), "flash-crowd": (11, 12, 13),
          "trace-replay": (11, 12, 13), "overload": (11, 12, 13), "fleet-100": (11, 12)}
GAP_GOAL = 0.03


@dataclass(frozen=True, slots=True)
class Run:
    path: Path
    seed: int | None

    @property
    def name(self) -> str:
        return self.path.stem if self.seed is None else f"{self.path.stem}:{self.seed}"


def scenario_file(name: str) -> Path:
    for folder in (SCENARIOS, SCENARIOS / "variants"):
        if (p := folder / f"{name}.yaml").exists():
            return p
    raise SystemExit(f"no scenario {name!r} in {SCENARIOS} or its variants")


def chosen_runs(spec: str) -> list[Run]:
    groups = {"shipped": [Run(p, None) for p in sorted(SCENARIOS.glob("*.yaml"))],
              "seeds": [Run(SCENARIOS / f"{n}.yaml", s) for n, seeds in SEEDED.items() for s in seeds],
              "variants": [Run(p, None) for p in sorted((SCENARIOS / "variants").glob("*.yaml"))]}
    if spec == "all":
        return [r for g in groups.values() for r in g]
    if spec in groups:
        return groups[spec]
    out = []
    for item in spec.split(","):
        name, _, seed = item.partition(":")
        out.append(Run(scenario_file(name), int(seed) if seed else None))
    return out


def with_settings(scn: Scenario, autoops: dict[str, Any], plugin_args: dict[str, Any]) -> Scenario:
    """``scn`` with the settings tried, validated as the scenario file would be."""
    if not autoops and not plugin_args:
        return scn
    doc = scn.model_dump()
    doc["autoops"] = {**doc["autoops"], **autoops}
    doc["pluginArgs"] = {**doc["pluginArgs"], **plugin_args}
    try:
        return Scenario.model_validate(doc)
    except ValidationError as e:
        raise SystemExit(f"--autoops / --plugin-args: {e}") from None


def policy_figures(run: Run, policy: str, autoops: dict[str, Any], plugin_args: dict[str, Any]) -> dict[str, float]:
    scn, base = load_scenario(run.path)
    if policy == "WaterLevel":
        scn = with_settings(scn, autoops, plugin_args)
    inputs = prepare(scn, seed=run.seed, base_dir=base)
    return figures(PolicyRun(inputs, make_policy(policy, scn.pluginArgs)).run(), scn.tickMinutes)


def baseline_figures(run: Run, policy: str, cache: Path | None) -> dict[str, float]:
    key = hashlib.sha256(run.path.read_bytes()).hexdigest()[:16]
    kept = cache / f"{run.path.stem}-{key}-{run.seed}-{policy}.json" if cache is not None else None
    if kept is not None and kept.exists():
        return dict(json.loads(kept.read_text()))
    out = policy_figures(run, policy, {}, {})
    if kept is not None:
        kept.write_text(json.dumps(out))
    return out


def judged(wl: dict[str, float], baselines: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The run's line: WaterLevel's figures and, per figure it loses on, the best baseline's value."""
    losses: dict[str, float] = {}
    for b in baselines.values():
        for figure in dominance(wl, b)["worseOn"]:
            losses[figure] = min(losses.get(figure, float("inf")), b[figure])
    return {"peak_gap_mean": wl["peak_gap_mean"], "replicas_moved": wl["replicas_moved"],
            "cross_domain_gib": round(wl["cross_domain_bytes"] / 2**30, 1),
            "sla_water_level_breaches": wl["sla_water_level_breaches"],
            "sla_latency_breaches": wl["sla_latency_breaches"], "dominates": not losses,
            "worse_on": {f: {"default": wl[f], "best_baseline": v} for f, v in sorted(losses.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="all",
                    help="all (default), shipped, seeds, variants, or NAME[:SEED],… (a shipped scenario, and a seed)")
    ap.add_argument("--autoops", type=json.loads, default={}, help="JSON object over each scenario's autoops")
    ap.add_argument("--plugin-args", type=json.loads, default={}, help="JSON object over each scenario's pluginArgs")
    ap.add_argument("--workers", type=positive_int, default=min(2, os.cpu_count() or 1),
                    help="processes running the policy runs")
    ap.add_argument("--cache", type=Path, default=None, help="folder keeping the baselines' figures")
    args = ap.parse_args()
    runs = chosen_runs(args.runs)
    for r in runs:  # a bad setting is refused before anything runs
        with_settings(load_scenario(r.path)[0], args.autoops, args.plugin_args)
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    print(f"# conditions: {len(runs)} runs ({args.runs}), autoops {json.dumps(args.autoops)}, pluginArgs "
          f"{json.dumps(args.plugin_args)}, {args.workers} workers, python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, baselines {'cached in ' + str(args.cache) if args.cache else 'run here'}",
          flush=True)
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        base = {(r, b): pool.submit(baseline_figures, r, b, args.cache) for r in runs for b in BASELINES}
        wl = {r: pool.submit(policy_figures, r, "WaterLevel", args.autoops, args.plugin_args) for r in runs}
        per_run: dict[str, Any] = {}
        for r in runs:
            line = per_run[r.name] = judged(wl[r].result(), {b: base[(r, b)].result() for b in BASELINES})
            worse = ", ".join(f"{f} {v['default']:,} (best baseline {v['best_baseline']:,})"
                              for f, v in line["worse_on"].items())
            print(f"{r.name:24s} gap {line['peak_gap_mean']:.4f}  moved {line['replicas_moved']:6d}  "
                  f"{line['cross_domain_gib']:9.1f} GiB  breaches {line['sla_water_level_breaches']:5d} / "
                  f"{line['sla_latency_breaches']:6d}  {'dominates' if line['dominates'] else 'worse on ' + worse}",
                  flush=True)
    print(json.dumps({"runs": len(runs), "dominating": sum(v["dominates"] for v in per_run.values()),
                      "gap_over_0_03": sorted(n for n, v in per_run.items() if v["peak_gap_mean"] > GAP_GOAL),
                      "wall_s": round(time.perf_counter() - started, 1), "autoops": args.autoops,
                      "plugin_args": args.plugin_args, "per_run": per_run}))


if __name__ == "__main__":
    main()
