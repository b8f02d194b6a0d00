"""Feedback loop settling (H3): the PI loop against a seeded simulated application.

The application's p99 latency is ``base / (1 - ρ)`` with ``ρ = load / (replicas × capacity)`` and
Gaussian noise; it reports every ``--report-s`` simulated seconds and the autoscaler turns the loop
on each report (cool-down and dead band as configured). Simulated time only — no sleeping.

    python bench/feedback.py --seeds 20 --load 400 --start 10

Prints the conditions, per-scenario figures, and a final JSON line: settling time (from the first
turn the replica count stays between what the target needs and 15 % above it), overshoot, direction
reversals, moves after settling.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drods.autoscaling.feedback import FeedbackSettings, LoopState, Observation, step  # noqa: E402
from drods.model.autoscaling import FeedbackTargets  # noqa: E402


def run(seed: int, load: float, start: int, turns: int, report_s: float, noise: float, target_ms: float,
        settings: FeedbackSettings) -> dict[str, float]:
    rng = random.Random(seed)
    targets = FeedbackTargets(latencyP99Ms=target_ms)
    replicas, state = start, LoopState()
    trace: list[int] = []
    latencies: list[float] = []
    for i in range(turns):
        now = i * report_s
        rho = min(load / (replicas * 10.0), 0.98)
        p99 = 50.0 / (1 - rho) * (1 + rng.gauss(0, noise))
        latencies.append(p99)
        s = step(targets, Observation(p99, None, None, now - 0.5), replicas, state, now, settings, 1, 1000)
        replicas, state = s.replicas, s.state
        trace.append(replicas)
    needed = next(n for n in range(1, 10_000) if 50.0 / (1 - min(load / (n * 10.0), 0.98)) <= target_ms)
    # settled: the first turn from which the count stays between one below what the target needs
    # (noise) and 15 % above it (the dead band's slack), to the end
    hi = math.ceil(needed * 1.15)
    settled = next((i for i in range(turns) if all(needed - 1 <= n <= hi for n in trace[i:])), turns)
    moves = [b - a for a, b in zip(trace, trace[1:], strict=False) if b != a]
    reversals = sum(1 for x, y in zip(moves, moves[1:], strict=False) if (x > 0) != (y > 0))
    after = trace[settled:] or trace[-1:]
    return {"settle_turns": settled, "settle_s": settled * report_s, "final": trace[-1], "needed": needed,
            "overshoot": max(trace) - needed, "reversals": reversals,
            "moves_after": sum(1 for a, b in zip(after, after[1:], strict=False) if a != b)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--load", type=float, default=400.0)
    ap.add_argument("--start", type=int, default=10)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--report-s", type=float, default=10.0)
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument("--target-ms", type=float, default=200.0)
    args = ap.parse_args()
    settings = FeedbackSettings()
    print(f"# seeded app: p99 = 50 ms / (1 - load/(replicas × 10)), load {args.load}, noise {args.noise:.0%}; "
          f"target {args.target_ms} ms; start {args.start} replicas; report every {args.report_s} s; {settings}")
    rows = [run(seed, args.load, args.start, args.turns, args.report_s, args.noise, args.target_ms, settings)
            for seed in range(args.seeds)]
    for seed, r in enumerate(rows):
        print(f"seed {seed:2d}: settled after {r['settle_s']:.0f} s, final {r['final']} (needed {r['needed']}), "
              f"overshoot {r['overshoot']}, reversals {r['reversals']}, moves after settling {r['moves_after']}")
    settle = [r["settle_s"] for r in rows]
    print(json.dumps({"bench": "feedback", "seeds": args.seeds, "load": args.load, "start": args.start,
                      "settle_s_median": statistics.median(settle), "settle_s_max": max(settle),
                      "overshoot_max": max(r["overshoot"] for r in rows),
                      "reversals_max": max(r["reversals"] for r in rows),
                      "moves_after_settling_max": max(r["moves_after"] for r in rows)}))


if __name__ == "__main__":
    main()
