"""Evaluation reports (W3): the figures of each policy, ``summary.json``, PNG plots and ``index.html``.

Figures (docs/whatif.md defines each): over ticks × up clusters of the true water level — peak,
p95 and the spread (sd over clusters, averaged over ticks); pending replica-minutes; SLA breaches
(cluster-ticks above the SLA water level + workload-ticks with a replica beyond the latency SLA);
replicas moved; cross-domain bytes; cost; the minutes the fleet was full (the replicas requested
fill it to its water-level limits) and the pending outside them; against the ideal (`ideal.py`):
the mean fluid lower bound of the peak, the mean gap to it, the p95 latency from users to their
replicas and its gap to the lowest possible.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np

from drods.whatif.engine import Inputs, Trace
from drods.whatif.ideal import weighted_p95

METRICS = ("peak_water_level", "p95_water_level", "spread_sd", "pending_replica_minutes",
           "pending_replica_minutes_not_full", "full_minutes", "sla_breaches",
           "replicas_moved", "cross_domain_bytes", "cost", "ideal_peak_mean", "ideal_peak_max", "peak_gap_mean",
           "p95_user_latency_ms", "latency_gap_ms", "sla_water_level_breaches", "sla_latency_breaches")


def figures(tr: Trace, tick_minutes: float) -> dict[str, float]:
    """The summary figures of one policy's trace (the contract's keys, all numbers)."""
    wl = tr.water_level.astype(np.float64)
    seen = ~np.isnan(wl)
    vals = wl[seen]
    rows = seen.sum(axis=1) > 0
    sd = float(np.mean([np.std(r[~np.isnan(r)]) for r in wl[rows]])) if rows.any() else 0.0
    return {
        "peak_water_level": round(float(vals.max()), 4) if vals.size else 0.0,
        "p95_water_level": round(float(np.percentile(vals, 95)), 4) if vals.size else 0.0,
        "spread_sd": round(sd, 4),
        "pending_replica_minutes": round(float(tr.pending.sum()) * tick_minutes, 2),
        **fleet_full(tr, tick_minutes),
        "sla_breaches": int(tr.wl_breaches + tr.latency_breaches),
        "replicas_moved": int(tr.moved),
        "cross_domain_bytes": float(round(tr.cross_domain_bytes)),
        "cost": round(tr.cost, 2),
        **against_ideal(tr),
        "sla_water_level_breaches": int(tr.wl_breaches),
        "sla_latency_breaches": int(tr.latency_breaches),
    }


def fleet_full(tr: Trace, tick_minutes: float) -> dict[str, float]:
    """The minutes when the replicas requested filled the fleet to its water-level limits (less one
    replica per cluster for packing: `drods.whatif.ideal.fits_under_limits`), and the pending
    replica-minutes outside them."""
    room = ~tr.full if tr.full.size == tr.pending.size else np.ones(tr.pending.size, dtype=bool)
    return {"full_minutes": round(float((~room).sum()) * tick_minutes, 2),
            "pending_replica_minutes_not_full": round(float(tr.pending[room].sum()) * tick_minutes, 2)}


def against_ideal(tr: Trace) -> dict[str, float]:
    """Issue 34's figures: the ideal peak and the gap to it (time-averaged over ticks with a cluster
    up), the p95 latency from users to their replicas (over replica-ticks) and its gap to the lowest."""
    wl = tr.water_level.astype(np.float64)
    rows = ~np.isnan(wl).all(axis=1) & ~np.isnan(tr.ideal_peak)
    ideal = tr.ideal_peak[rows]
    gap = np.nanmax(wl[rows], axis=1) - ideal if rows.any() else np.zeros(0)
    p95 = weighted_p95(tr.latency_bins, tr.latency_hist)
    best = weighted_p95(tr.latency_bins, tr.ideal_latency_hist)
    return {
        "ideal_peak_mean": round(float(ideal.mean()), 4) if ideal.size else 0.0,
        # rounded down: still a bound no placement under the policy's constraints could stay below
        "ideal_peak_max": float(np.floor(ideal.max() * 1e4) / 1e4) if ideal.size else 0.0,
        "peak_gap_mean": round(float(gap.mean()), 4) if gap.size else 0.0,
        "p95_user_latency_ms": round(p95, 1),
        "latency_gap_ms": round(p95 - best, 1),
    }


def summary(inputs: Inputs, traces: dict[str, Trace]) -> dict[str, Any]:
    scn = inputs.scenario
    out: dict[str, Any] = {
        "scenario": scn.name,
        "seed": inputs.seed,
        "policies": {name: figures(tr, scn.tickMinutes) for name, tr in traces.items()},
        "details": {
            "clusters": inputs.fleet.n, "ticks": scn.ticks, "tickMinutes": scn.tickMinutes,
            "durationHours": scn.durationHours, "workloadEvents": len(inputs.workloads),
            "fleetEvents": len(inputs.events),
            "policies": {name: {"decisions": tr.decisions, "slaWaterLevelBreaches": tr.wl_breaches,
                                "slaLatencyBreaches": tr.latency_breaches, "operations": dict(sorted(
                                    tr.operations.items())), "wallSeconds": round(tr.wall_s, 2)}
                         for name, tr in traces.items()},
        },
    }
    pol = out["policies"]
    out["comparison"] = comparison(pol) if "WaterLevel" in pol else {}  # always there: {} without both sides
    return out


def comparison(pol: dict[str, dict[str, float]]) -> dict[str, Any]:
    """WaterLevel against each baseline, with the issue's targets (peak ≥ 30 % lower, pending ≤ 1/5)."""
    wl = pol["WaterLevel"]
    out: dict[str, Any] = {}
    for name, b in pol.items():
        if name == "WaterLevel":
            continue
        peak_cut = 1.0 - wl["peak_water_level"] / b["peak_water_level"] if b["peak_water_level"] else 0.0
        wp, bp = wl["pending_replica_minutes"], b["pending_replica_minutes"]
        # both 0: no ratio (null), and the target holds only trivially; WaterLevel > 0 = baseline: not met
        pend = wp / bp if bp else None
        dom = dominance(wl, b)
        out[name] = {"peakReduction": round(peak_cut, 4), "peakTargetMet": peak_cut >= 0.30,
                     "pendingRatio": None if pend is None else round(pend, 4),
                     "pendingTargetMet": wp == 0 if pend is None else pend <= 0.2,
                     "movedExtra": int(wl["replicas_moved"] - b["replicas_moved"]),
                     **dom, "givesWay": gives_way(wl, b, dom["worseOn"])}
    return out


# the figures on which WaterLevel must be no worse than a baseline; cost within 5 %
DOMINANCE = ("peak_water_level", "sla_water_level_breaches", "sla_latency_breaches", "pending_replica_minutes",
             "cross_domain_bytes")
COST_SLACK = 1.05


def dominance(wl: dict[str, float], b: dict[str, float]) -> dict[str, Any]:
    """``dominates``: WaterLevel is no worse on every DOMINANCE figure and costs ≤ 1.05 × the baseline;
    ``worseOn`` names the figures where it is not."""
    worse = [k for k in DOMINANCE if k in wl and k in b and wl[k] > b[k]]
    if "cost" in wl and "cost" in b and wl["cost"] > COST_SLACK * b["cost"]:
        worse.append("cost")
    return {"dominates": not worse, "worseOn": worse}


def gives_way(wl: dict[str, float], b: dict[str, float], worse: list[str]) -> dict[str, str]:
    """Why WaterLevel is worse on a figure where the scenario leaves it no choice:

    * pending replicas while the fleet is full (the replicas requested fill it to its water-level
      limits) — the policy holds the limit, a baseline without one runs them above it — when all of
      its pending beyond the baseline's falls in those minutes;
    * the peak, when at some tick even the lowest peak any placement of its replicas could reach under
      its constraints (`ideal_peak_max`: its users' latency SLO while a cluster within it has room under
      the limit) is at or above the baseline's peak — its peak cannot be lower, whatever it does then.
    """
    out: dict[str, str] = {}
    if "peak_water_level" in worse and wl.get("ideal_peak_max", 0.0) >= b.get("peak_water_level", float("inf")):
        out["peak_water_level"] = (
            f"the lowest peak any placement of the replicas it ran could reach under its constraints (each "
            f"users' region within its latency SLO while a cluster there has room under the water-level limit) "
            f"rose to {wl['ideal_peak_max']:.3f}, above the baseline's {b['peak_water_level']:.3f}, which "
            f"ignores the users ({wl.get('sla_latency_breaches', 0):,} latency breaches against "
            f"{b.get('sla_latency_breaches', 0):,})")
    if "pending_replica_minutes" in worse and wl.get("full_minutes", 0) > 0 and \
            wl.get("pending_replica_minutes_not_full", 0.0) <= b["pending_replica_minutes"]:
        out["pending_replica_minutes"] = (
            f"for {wl['full_minutes']:,.0f} min the replicas requested filled the fleet to its water-level limits "
            f"(each cluster within one replica of its limit): WaterLevel holds the limit and leaves replicas "
            f"pending then ({wl['pending_replica_minutes'] - wl['pending_replica_minutes_not_full']:,.0f} "
            f"replica-min), the baseline runs them above it ({b.get('sla_water_level_breaches', 0):,} "
            f"water-level breaches)")
    return out


# ---------------------------------------------------------------------- plots
def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_water_levels(path: Path, inputs: Inputs, traces: dict[str, Trace]) -> None:
    """One panel per policy: each cluster's water level over time (a band beyond 40 clusters)."""
    plt = _plt()
    scn = inputs.scenario
    hours = np.arange(scn.ticks) * scn.tickMinutes / 60.0
    k = len(traces)
    fig, axes = plt.subplots(k, 1, figsize=(10, 2.4 * k + 0.6), sharex=True, sharey=True, squeeze=False)
    for ax, (name, tr) in zip(axes[:, 0], traces.items(), strict=True):
        wl = tr.water_level.astype(np.float64)
        if wl.shape[1] <= 40:
            ax.plot(hours, wl, linewidth=0.7, alpha=0.8)
        else:
            with np.errstate(all="ignore"):
                lo, med, hi = (np.nanpercentile(wl, q, axis=1) for q in (5, 50, 95))
            ax.fill_between(hours, lo, hi, alpha=0.3, label="p5–p95 over clusters")
            ax.plot(hours, med, linewidth=1.0, label="median")
        with np.errstate(all="ignore"):
            ax.plot(hours, np.nanmax(wl, axis=1), color="black", linewidth=1.0, label="max")
        ax.axhline(scn.sla.waterLevel, color="red", linestyle="--", linewidth=0.8, label="SLA limit")
        ax.set_ylabel("water level")
        ax.set_title(name, loc="left", fontsize=10)
        ax.legend(loc="upper right", fontsize=7)
    axes[-1, 0].set_xlabel("simulated hours")
    fig.suptitle(f"{scn.name}: water level per cluster", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_pending(path: Path, inputs: Inputs, traces: dict[str, Trace]) -> None:
    plt = _plt()
    scn = inputs.scenario
    hours = np.arange(scn.ticks) * scn.tickMinutes / 60.0
    fig, ax = plt.subplots(figsize=(10, 3.2))
    for name, tr in traces.items():
        ax.plot(hours, tr.pending, label=name, linewidth=1.2)
    ax.set_xlabel("simulated hours")
    ax.set_ylabel("pending replicas")
    ax.set_title(f"{scn.name}: replicas requested but not running", fontsize=11)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_comparison(path: Path, figs: dict[str, dict[str, float]]) -> None:
    plt = _plt()
    names = list(figs)
    rows = -(-len(METRICS) // 4)
    fig, axes = plt.subplots(rows, 4, figsize=(13, 2.75 * rows))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax in axes.flat[len(METRICS):]:
        ax.set_visible(False)
    for ax, metric in zip(axes.flat, METRICS, strict=False):
        vals = [figs[n][metric] for n in names]
        ax.bar(range(len(names)), vals, color=[colours[i % len(colours)] for i in range(len(names))])
        if not any(vals):  # matplotlib centres an all-zero axis on 0 (−0.04…0.04): say it instead
            ax.set_ylim(0, 1)
            ax.text(0.5, 0.5, "0 for every policy", ha="center", va="center", fontsize=8, transform=ax.transAxes)
        ax.set_xticks(range(len(names)), names, rotation=25, fontsize=7, ha="right")
        ax.set_title(metric, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle("policies compared (lower is better)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _same_ideals(traces: dict[str, Trace]) -> list[list[str]]:
    """The policies grouped by their ideal (its peak over time and its latencies): one line per distinct one."""
    groups: list[list[str]] = []
    for name, tr in traces.items():
        for g in groups:
            first = traces[g[0]]
            if np.array_equal(first.ideal_peak, tr.ideal_peak, equal_nan=True) and \
                    np.array_equal(first.latency_bins, tr.latency_bins) and \
                    np.array_equal(first.ideal_latency_hist, tr.ideal_latency_hist):
                g.append(name)
                break
        else:
            groups.append([name])
    return groups


def plot_ideal(path: Path, inputs: Inputs, traces: dict[str, Trace]) -> None:
    """Each policy's peak against its own ideal peak over time (the lowest any placement under its
    constraints could reach), and its user latencies against its lowest; policies whose ideal is the
    same share one dashed line, in the first one's colour, and the legend says whose it is."""
    plt = _plt()
    scn = inputs.scenario
    hours = np.arange(scn.ticks) * scn.tickMinutes / 60.0
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.8))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {name: cycle[i % len(cycle)] for i, name in enumerate(traces)}
    for name, tr in traces.items():
        with np.errstate(all="ignore"):
            ax.plot(hours, np.nanmax(tr.water_level.astype(np.float64), axis=1), color=colour[name], label=name,
                    linewidth=1.0)
        cum = np.cumsum(tr.latency_hist)
        if cum.size and cum[-1] > 0:
            bx.step(tr.latency_bins, cum / cum[-1], color=colour[name], where="post", label=name)
    groups = _same_ideals(traces)
    for group in groups:
        tr = traces[group[0]]
        whose = "" if len(groups) == 1 and len(group) > 1 else f" of {', '.join(group)}"
        ax.plot(hours, tr.ideal_peak, color=colour[group[0]], linestyle="--", linewidth=1.2,
                label=f"ideal{whose} (lower bound)" if whose else "ideal of every policy (lower bound)")
        cum = np.cumsum(tr.ideal_latency_hist)
        if cum.size and cum[-1] > 0:
            bx.step(tr.latency_bins, cum / cum[-1], color=colour[group[0]], linestyle="--", where="post",
                    label=f"lowest{whose}" if whose else "lowest, of every policy")
    ax.set_xlabel("simulated hours")
    ax.set_ylabel("peak water level")
    ax.set_title("peak against each policy's ideal (dashed)", fontsize=10)
    # below the axes: a line per policy and per distinct ideal would hide the curves
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    bx.set_xlabel("latency from the users (ms)")
    bx.set_ylabel("share of replica-time")
    bx.set_title("user latency (CDF) against the lowest possible (dashed)", fontsize=10)
    bx.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _cell(value: Any) -> str:
    """A figure as a reader takes it in: counts and large amounts whole with thousands separators
    (bytes too), levels and ratios to four significant digits."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return html.escape(str(value))
    if isinstance(value, int) or abs(value) >= 1000 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _comparison_table(comparison: dict[str, Any]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("baseline", "dominates", "worse on", "peak reduction",
                                             "pending ratio", "replicas moved beyond it", "where it gives way"))
    rows = "".join(
        "<tr><th>" + html.escape(name) + "</th>"
        f"<td>{'yes' if c.get('dominates') else 'no'}</td>"
        f"<td>{html.escape(', '.join(c.get('worseOn') or []) or '—')}</td>"
        f"<td>{c['peakReduction']:.1%}</td>"
        f"<td>{'—' if c.get('pendingRatio') is None else _cell(c['pendingRatio'])}</td>"
        f"<td>{_cell(c.get('movedExtra', 0))}</td>"
        "<td style='text-align:left'>" + html.escape("; ".join(f"{k}: {v}" for k, v in (c.get("givesWay") or {})
                                                              .items()) or "—") + "</td></tr>"
        for name, c in comparison.items())
    return f"<h2>WaterLevel against the baselines</h2><table><tr>{head}</tr>{rows}</table>"


def write_index(path: Path, summ: dict[str, Any], images: list[str]) -> None:
    pol = summ["policies"]
    head = "".join(f"<th>{html.escape(m)}</th>" for m in METRICS)
    rows = "".join("<tr><th>" + html.escape(n) + "</th>" + "".join(f"<td>{_cell(v[m])}</td>" for m in METRICS)
                   + "</tr>" for n, v in pol.items())
    imgs = "".join(f'<figure><img src="{html.escape(i)}" alt="{html.escape(i)}"></figure>' for i in images)
    comp = _comparison_table(summ["comparison"]) if summ.get("comparison") else ""
    doc = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>DRO-DS what-if: {html.escape(summ['scenario'])}</title>
<style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:right}}
.grid{{display:flex;flex-wrap:wrap;gap:1em}}img{{max-width:48vw;border:1px solid #eee}}</style></head>
<body><h1>Scenario {html.escape(summ['scenario'])} (seed {summ['seed']})</h1>
<table><tr><th>policy</th>{head}</tr>{rows}</table>{comp}
<div class="grid">{imgs}</div>
<p>Figures are defined in docs/whatif.md; the raw numbers are in <a href="summary.json">summary.json</a>.</p>
</body></html>
"""
    path.write_text(doc)


def write_report(out: Path, inputs: Inputs, traces: dict[str, Trace]) -> dict[str, Any]:
    """summary.json, water_level.png, pending.png, comparison.png and index.html under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    summ = summary(inputs, traces)
    (out / "summary.json").write_text(json.dumps(summ, indent=2) + "\n")
    plot_water_levels(out / "water_level.png", inputs, traces)
    plot_pending(out / "pending.png", inputs, traces)
    plot_comparison(out / "comparison.png", summ["policies"])
    plot_ideal(out / "ideal.png", inputs, traces)
    write_index(out / "index.html", summ, ["water_level.png", "pending.png", "comparison.png", "ideal.png"])
    return summ
