"""What the sim's data-mover pods do each pass (see `drods.sim.storage` for the model): a VolumeCopy
pod moves bytes at the sim's bandwidth from the source's published claim into its target claim; a
Hook run in the target copies its workload's claims and leaves them a standby that follows the source
until the final run or the plan's end promotes it; a lag probe pod judges the lag of its workload's
copies. Pure: (pod, claims, what the source published, now) → the pod's progress, the claim's new
content, and the exit code once it ends."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drods.sim.config import parse_memory
from drods.sim.storage import (
    ANN_CHECKSUM,
    ANN_COPY,
    ANN_REPLICA_OF,
    ANN_USED_BYTES,
    ANN_WRITES,
    Published,
    checksum,
    pod_claims,
    set_content,
)

Obj = dict[str, Any]


def env_of(pod: Mapping[str, Any]) -> dict[str, str]:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return {str(e.get("name")): str(e.get("value") or "") for e in containers[0].get("env") or []
            if isinstance(e, dict)}


HOOK_RUNS = ("copy", "catchup", "final")


def role(pod: Mapping[str, Any]) -> str | None:
    """copy (a VolumeCopy pod), dataset (a CachePlan's copy), probe (a lag probe), hook (a Hook mover's
    run: your Job, with the plan in its environment) or None."""
    env = env_of(pod)
    if env.get("MIGRATION_CLAIM"):
        return "copy"
    if env.get("COPY_DATASET"):
        return "dataset"
    if "MIGRATION_MAX_LAG_SECONDS" in env:
        return "probe"
    return "hook" if env.get("MIGRATION_RUN") in HOOK_RUNS and env.get("MIGRATION_WORKLOAD") else None


def workload_claims(pod: Mapping[str, Any], claims: Mapping[tuple[str, str], Obj]) -> list[tuple[str, str]]:
    """The claims here of the workload a hook or probe pod works for: those it mounts
    (``mountWorkloadVolumes``), else those named after its workload (``<template>-<name>-<ordinal>``)."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "default")
    mounted = [(ns, c) for c in pod_claims(pod) if (ns, c) in claims]
    if mounted:
        return mounted
    kind_ns_name = env_of(pod).get("MIGRATION_WORKLOAD", "").split("/")
    if len(kind_ns_name) != 3:
        return []
    _, wns, name = kind_ns_name
    return sorted(k for k in claims if k[0] == wns and f"-{name}-" in k[1])


def held(pods: Iterable[Mapping[str, Any]], claims: Mapping[tuple[str, str], Obj]) -> set[tuple[str, str]]:
    """The claims a data run of a plan still in progress works on: a mover pod here (any phase; its Job
    goes when the plan ends) names them."""
    out: set[tuple[str, str]] = set()
    for pod in pods:
        kind = role(pod)
        if kind is None or kind == "dataset" or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if kind == "copy":
            out.add((str(pod["metadata"].get("namespace") or "default"), env_of(pod)["MIGRATION_CLAIM"]))
        else:
            out.update(workload_claims(pod, claims))
    return out


def hook_step(pod: Mapping[str, Any], claims: Mapping[tuple[str, str], Obj], src: Mapping[str, Published],
              me: str, now: float) -> list[Obj]:
    """What a Hook run (your Job, whatever it runs) does to its workload's claims in the target, as the
    copy a Hook makes (a base backup set up as a streaming standby): from the ``copy`` run on, each claim
    holds the source's content and is a replica of it (``replica-of``: it takes no writes of its own)
    that follows the source while the plan's runs are there; a running ``final`` run, once the source
    is fenced, takes the rest and promotes it. A run in the source (``runOn: Source``) pushes to a
    cluster this sim does not hold: nothing here."""
    env = env_of(pod)
    run, source = env.get("MIGRATION_RUN", ""), env.get("MIGRATION_SOURCE_CLUSTER", "")
    if not source or source == me:
        return []
    running = (pod.get("status") or {}).get("phase") == "Running"
    out: list[Obj] = []
    for key in workload_claims(pod, claims):
        claim, p = claims[key], src.get(f"{key[0]}/{key[1]}")
        if p is None:
            continue
        replica = _ann_of(claim).get(ANN_REPLICA_OF) == source
        if run == "final" and running and replica and p.read_only:
            new = set_content({**claim}, p.used, p.writes, now)
            new["metadata"]["annotations"].pop(ANN_REPLICA_OF, None)  # promoted: it takes the writes now
            out.append(new)
        elif (replica or (run == "copy" and running)) and (
                not replica or _count(claim, ANN_WRITES) != p.writes or _count(claim, ANN_USED_BYTES) != p.used):
            new = set_content({**claim}, p.used, p.writes, now)
            new["metadata"]["annotations"][ANN_REPLICA_OF] = source
            out.append(new)
    return out


def _ann_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


@dataclass(frozen=True, slots=True)
class Progress:
    pod_annotation: str | None = None  # the pod's new progress record
    claim: Obj | None = None  # the target claim's new content
    exit_code: int | None = None  # set when the pod ends
    message: str = ""
    report: Obj | None = None  # what the mover writes on its Job when it ends (its ``error`` when it fails)


def failed(message: str, pod_annotation: str | None = None) -> Progress:
    """A mover that gives up: exit 1, its cause as its termination message and in the report it writes
    on its Job (``{error}``), as a transport client says why before it exits."""
    return Progress(pod_annotation, exit_code=1, message=message, report={"error": message})


def _count(claim: Mapping[str, Any], key: str) -> int:
    try:
        return int(float(((claim.get("metadata") or {}).get("annotations") or {}).get(key) or 0))
    except ValueError:
        return 0


def _capacity(claim: Mapping[str, Any]) -> int | None:
    raw = (((claim.get("status") or {}).get("capacity")) or {}).get("storage")
    try:
        return parse_memory(str(raw)) if raw else None
    except ValueError:
        return None


def copy_step(pod: Mapping[str, Any], claim: Obj | None, src: Published | None, now: float,
              bandwidth: float) -> Progress:
    """One pass of a VolumeCopy pod (bandwidth in bytes per second)."""
    env = env_of(pod)
    run, source = env.get("MIGRATION_RUN", "copy"), env.get("MIGRATION_SOURCE_CLUSTER", "")
    if claim is None or src is None:
        return Progress(message="waiting for the target claim and the source's")
    if run == "final" and not src.read_only:
        return Progress(message="waiting for the source to be fenced")
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANN_COPY)
    prog: Obj = json.loads(raw) if raw else {}
    tw, tu = _count(claim, ANN_WRITES), _count(claim, ANN_USED_BYTES)
    if env.get("MIGRATION_FOLLOW") == "true" and run == "catchup":
        if not _replica(claim):  # a final run promoted it (the follower's Job not deleted yet): it is no copy now
            return Progress(message="the copy is promoted: nothing to follow")
        n = min(max(src.writes - tw, 0), math.floor(bandwidth * max(now - float(prog.get("at", now)), 0)
                                                      / max(src.write_bytes, 1)))
        prog.update(at=now, moved=int(prog.get("moved", 0)) + n * src.write_bytes)
        new = set_content({**claim}, src.used if tw + n >= src.writes else tu + n * src.write_bytes, tw + n, now)
        new["metadata"]["annotations"][ANN_REPLICA_OF] = source
        return Progress(json.dumps(prog), new if n > 0 else None)
    if not prog:
        total = src.used if run == "copy" else max(src.writes - tw, 0) * src.write_bytes
        prog = {"total": total, "moved": 0, "goalWrites": src.writes, "goalUsed": src.used, "startedAt": now, "at": now}
    cap = _capacity(claim)
    if cap is not None and int(prog["goalUsed"]) > cap:
        return failed(f"no space left on device: {prog['goalUsed']} bytes into a {cap}-byte claim", json.dumps(prog))
    moved = min(float(prog["total"]), float(prog["moved"]) + bandwidth * max(now - float(prog["at"]), 0))
    prog.update(moved=moved, at=now)
    if moved < float(prog["total"]):
        return Progress(json.dumps(prog))
    new = set_content({**claim}, int(prog["goalUsed"]), int(prog["goalWrites"]), now)
    if run == "final":
        new["metadata"]["annotations"].pop(ANN_REPLICA_OF, None)  # promoted: it takes the writes now
    else:
        new["metadata"]["annotations"][ANN_REPLICA_OF] = source
    seconds = max(now - float(prog["startedAt"]), 1e-9)
    prog.update(seconds=round(seconds, 3), rateBytesPerSecond=round(moved / seconds),
                checksum=new["metadata"]["annotations"].get("sim.drods.io/checksum"))
    return Progress(json.dumps(prog), new, 0,
                    report=_report(moved, seconds, str(prog["checksum"]),
                                   checksum(int(prog["goalUsed"]), int(prog["goalWrites"]))))


def _report(moved: float, seconds: float, mine: str, source: str) -> Obj:
    """What the transport writes on its Job when it ends (`drods.model.annotations.RUN_REPORT`)."""
    return {"bytes": int(moved), "seconds": round(seconds, 3), "bytesPerSecond": round(moved / seconds),
            "checksum": mine, "sourceChecksum": source}


def dataset_step(pod: Mapping[str, Any], now: float, bandwidth: float, claim: Obj | None = None) -> Progress:
    """One pass of a CachePlan's copy pod: ``COPY_SIZE_BYTES`` of the dataset pulled from
    ``COPY_SOURCE_CLUSTER`` at the sim's bandwidth, so it takes size ÷ bandwidth; the copy's content
    (the dataset at that size) hashes as the source's and lands in ``claim``, the one the pod mounts."""
    env = env_of(pod)
    try:
        total = max(int(float(env.get("COPY_SIZE_BYTES") or 0)), 0)
    except ValueError:
        return failed("COPY_SIZE_BYTES is not a number")
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANN_COPY)
    prog: Obj = json.loads(raw) if raw else {"total": total, "moved": 0, "startedAt": now, "at": now}
    moved = min(float(prog["total"]), float(prog["moved"]) + bandwidth * max(now - float(prog["at"]), 0))
    prog.update(moved=moved, at=now)
    if moved < float(prog["total"]):
        return Progress(json.dumps(prog))
    seconds = max(now - float(prog["startedAt"]), 1e-9)
    digest = checksum(int(prog["total"]), 0)
    prog.update(seconds=round(seconds, 3), checksum=digest)
    filled = None
    if claim is not None:
        filled = {**claim, "metadata": {**claim["metadata"], "annotations": {
            **(claim["metadata"].get("annotations") or {}), ANN_USED_BYTES: str(int(prog["total"])),
            ANN_CHECKSUM: digest}}}
    return Progress(json.dumps(prog), filled, exit_code=0, report=_report(moved, seconds, digest, digest))


def _replica(claim: Mapping[str, Any]) -> bool:
    return bool(((claim.get("metadata") or {}).get("annotations") or {}).get(ANN_REPLICA_OF))


def probe_exit(pod: Mapping[str, Any], claims: Mapping[tuple[str, str], Obj],
               sources: Mapping[str, Mapping[str, Published]]) -> int:
    """0 when every copy of the workload's claims here lags its source by at most MIGRATION_MAX_LAG_SECONDS
    of writes (a claim with no copy yet counts as behind), else 1."""
    env = env_of(pod)
    limit = float(env.get("MIGRATION_MAX_LAG_SECONDS") or 0)
    kind_ns_name = env.get("MIGRATION_WORKLOAD", "").split("/")
    if len(kind_ns_name) != 3:
        return 1
    _, ns, name = kind_ns_name
    src = sources.get(env.get("MIGRATION_SOURCE_CLUSTER", ""), {})
    mine = [c for (cns, cname), c in claims.items() if cns == ns and f"-{name}-" in cname]
    if not mine:
        return 1
    for c in mine:
        p = src.get(f"{ns}/{c['metadata']['name']}")
        if p is None or not _replica(c) and p.writes > _count(c, ANN_WRITES):
            return 1
        behind = max(p.writes - _count(c, ANN_WRITES), 0)
        if behind > (limit * p.rate if p.rate > 0 else 0):
            return 1
    return 0
