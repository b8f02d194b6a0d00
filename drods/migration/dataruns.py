"""The Jobs of a plan's data step ("runs") and what they add up to.

A run is named ``<stage>`` (Hook mover: one Job per stage), ``<stage>-<K>`` (VolumeCopy: one Job per
claim K of ``status.data.claims``) or ``probe-<N>`` / ``probe-final`` (the lag check). Stages:
``copy`` (CopyData), ``catchup`` (CatchUp without a lag check), ``final`` (the sync inside the write
freeze). Every name is derived from the recorded status, so a new leader finds the runs a previous
one started instead of starting them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drods.model.migration import MigrationPlanSpec

COPY, CATCHUP, FINAL, PROBE = "copy", "catchup", "final", "probe"
PROBE_FINAL = "probe-final"


@dataclass(frozen=True, slots=True)
class HookState:
    state: str  # absent | running | complete | failed
    message: str = ""
    report: Mapping[str, Any] | None = None  # what the run's Job reported about itself (a copy's figures)


def data_of(status: Mapping[str, Any]) -> Mapping[str, Any]:
    data = status.get("data")
    return data if isinstance(data, Mapping) else {}


def stage_runs(status: Mapping[str, Any], stage: str) -> tuple[str, ...]:
    data = data_of(status)
    mover = data.get("mover")
    if mover == "VolumeCopy":
        return tuple(f"{stage}-{k}" for k in range(len(data.get("claims") or [])))
    return (stage,) if mover == "Hook" else ()


def probe_run(status: Mapping[str, Any]) -> str:
    return f"{PROBE}-{int((status.get('catchUp') or {}).get('probes') or 0)}"


def all_runs(status: Mapping[str, Any]) -> tuple[str, ...]:
    """Every run the plan may have started (for watching and for the clean-up)."""
    runs = [r for stage in (COPY, CATCHUP, FINAL) for r in stage_runs(status, stage)]
    if data_of(status).get("maxLagSeconds") is not None:
        runs += [f"{PROBE}-{n}" for n in range(int((status.get("catchUp") or {}).get("probes") or 0) + 1)]
        runs.append(PROBE_FINAL)
    return tuple(runs)


def run_cluster(spec: MigrationPlanSpec, status: Mapping[str, Any], run: str) -> str:
    """Where a run goes: a Hook run where ``runOn`` says, every other run in the target."""
    step = spec.data_step()
    source, target = str(status.get("sourceCluster") or ""), str(status.get("targetCluster") or "")
    if step is not None and step.mover == "Hook" and step.hook is not None and step.hook.runOn == "Source" \
            and not run.startswith(PROBE):
        return source
    return target


def outcome(runs: tuple[str, ...], hooks: Mapping[str, HookState]) -> HookState:
    """Failed when any run failed, complete when all did, else running."""
    states = [(r, hooks.get(r) or HookState("absent")) for r in runs]
    for r, h in states:
        if h.state == "failed":
            return HookState("failed", f"{r}: {h.message}".rstrip(": "))
    if all(h.state == "complete" for _, h in states):
        return HookState("complete")
    done = sum(1 for _, h in states if h.state == "complete")
    return HookState("running", f"{done}/{len(states)} done")


def claim_name(entry: Any) -> str:
    """A ``status.data.claims[]`` entry's claim: ``{name, …figures}`` (a bare name from before figures)."""
    return str(entry.get("name") if isinstance(entry, Mapping) else entry)
