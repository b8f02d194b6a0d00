"""One pass of the sim's storage model (`drods.sim.storage`): provision claims, apply fences, count the
writers' writes, move the movers' bytes, publish to the other sims. Pure but for the network files;
the sim's controller writes what it returns."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from drods.sim import movers
from drods.sim.config import ANN_EXIT_CODE
from drods.sim.storage import (
    ANN_COPY,
    ANN_READ_ONLY,
    ANN_REPLICA_OF,
    ANN_WRITE_BYTES,
    ANN_WRITE_RATE,
    DEFAULT_WRITE_BYTES,
    Network,
    Published,
    StoragePass,
    WriteClock,
    pod_claims,
    provision,
    statefulset_claims,
    writable,
)
from drods.sim.workloads import is_ready

Obj = dict[str, Any]


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(obj["metadata"].get("namespace") or "default"), str(obj["metadata"]["name"])


def _fenced(claims: dict[tuple[str, str], Obj], fenced: set[str], out: StoragePass) -> None:
    for key, c in list(claims.items()):
        want = f"{key[0]}/{key[1]}" in fenced
        ann = dict(c["metadata"].get("annotations") or {})
        if (ann.get(ANN_READ_ONLY) == "true") != want:
            if want:
                ann[ANN_READ_ONLY] = "true"
            else:
                ann.pop(ANN_READ_ONLY, None)
            claims[key] = {**c, "metadata": {**c["metadata"], "annotations": ann}}
            out.update.append(claims[key])


def _writes(statefulsets: Iterable[Obj], pods: Iterable[Obj], claims: dict[tuple[str, str], Obj],
            clock: WriteClock, now: float, out: StoragePass) -> None:
    sts = {_key(s): s for s in statefulsets}
    writing: set[tuple[str, str]] = set()
    for pod in pods:
        ann = pod["metadata"].get("annotations") or {}
        if ANN_WRITE_RATE not in ann or not is_ready(pod):
            continue
        try:
            rate, size = float(ann[ANN_WRITE_RATE]), int(ann.get(ANN_WRITE_BYTES) or DEFAULT_WRITE_BYTES)
        except ValueError:
            continue
        ns = str(pod["metadata"].get("namespace") or "default")
        owner = next((r["name"] for r in pod["metadata"].get("ownerReferences") or []
                      if r.get("kind") == "StatefulSet"), None)
        names = pod_claims(pod) + (statefulset_claims(sts[(ns, owner)], pod["metadata"]["name"])
                                   if owner and (ns, owner) in sts else [])
        for name in names:
            c = claims.get((ns, name))
            if c is None or not writable(c) or rate <= 0:
                continue
            writing.add((ns, name))
            new = clock.writes(c, rate, size, now)
            if new is not None:
                claims[(ns, name)] = new
                out.update.append(new)
    clock.keep_only(writing)


def _movers(pods: Iterable[Obj], claims: dict[tuple[str, str], Obj], network: Network, now: float,
            bandwidth: float, out: StoragePass) -> dict[str, set[str]]:
    sources: dict[str, dict[str, Published]] = {}
    fences: dict[str, set[str]] = {}
    for pod in pods:
        kind = movers.role(pod)
        if kind is None:
            continue
        env = movers.env_of(pod)
        source, ns = env.get("MIGRATION_SOURCE_CLUSTER", ""), str(pod["metadata"].get("namespace") or "default")
        if source and source not in sources:
            sources[source] = network.read(source)
        phase = (pod.get("status") or {}).get("phase")
        final = env.get("MIGRATION_RUN") == "final" and not pod["metadata"].get("deletionTimestamp")
        if kind == "copy" and final:
            fences.setdefault(source, set()).add(f"{ns}/{env['MIGRATION_CLAIM']}")
        if kind == "hook":
            if final and source != network.me:
                fences.setdefault(source, set()).update(f"{k[0]}/{k[1]}" for k in movers.workload_claims(pod, claims))
            if not pod["metadata"].get("deletionTimestamp"):
                for c in movers.hook_step(pod, claims, sources.get(source, {}), network.me, now):
                    claims[_key(c)] = c
                    out.update.append(c)
            continue
        if phase != "Running":
            continue
        if kind == "probe":
            code = str(movers.probe_exit(pod, claims, sources))
            ann = pod["metadata"].get("annotations") or {}
            if ann.get(ANN_EXIT_CODE) != code:
                out.pods.append({**pod, "metadata": {**pod["metadata"], "annotations": {**ann, ANN_EXIT_CODE: code}}})
            continue
        if kind == "dataset":
            key = (ns, next(iter(pod_claims(pod)), ""))
            step = movers.dataset_step(pod, now, bandwidth, claims.get(key))
        else:
            key = (ns, env["MIGRATION_CLAIM"])
            step = movers.copy_step(pod, claims.get(key), sources.get(source, {}).get(f"{ns}/{key[1]}"), now,
                                    bandwidth)
        if step.claim is not None:
            claims[key] = step.claim
            out.update.append(step.claim)
        updated = pod
        if step.pod_annotation is not None:
            ann = {**(pod["metadata"].get("annotations") or {}), ANN_COPY: step.pod_annotation}
            updated = {**pod, "metadata": {**pod["metadata"], "annotations": ann}}
        if step.report is not None:
            out.reports.append((updated, step.report))
        if step.exit_code is not None:
            out.finished.append((updated, step.exit_code, step.message))
        elif updated is not pod:
            out.pods.append(updated)
    return fences


def _promote_unheld(pods: list[Obj], claims: dict[tuple[str, str], Obj], out: StoragePass) -> None:
    """A copy not yet promoted whose plan is over (no data run of it here any more: the plan's Jobs go when
    it ends) is the workload's own claim now: it takes the writes of the copy that runs on it — with the
    data as of its last sync (a move without a final sync loses what the source took since; the plan
    says it did not measure that, ``lostWritesMeasuredBy: none``)."""
    busy = movers.held(pods, claims)
    for key, c in list(claims.items()):
        ann = dict(c["metadata"].get("annotations") or {})
        if ann.get(ANN_REPLICA_OF) and key not in busy:
            ann.pop(ANN_REPLICA_OF)
            claims[key] = {**c, "metadata": {**c["metadata"], "annotations": ann}}
            out.update.append(claims[key])


def data_pass(statefulsets: list[Obj], pods: list[Obj], claim_list: list[Obj], network: Network, clock: WriteClock,
              now: float, stamp: str, bandwidth: float) -> StoragePass:
    """What to write this pass; ``bandwidth`` in bytes per second."""
    out = StoragePass()
    claims = {_key(c): c for c in claim_list}
    out.create = provision(statefulsets, claims, stamp)
    _fenced(claims, network.fenced(), out)
    _writes(statefulsets, pods, claims, clock, now, out)
    fences = _movers(pods, claims, network, now, bandwidth, out)
    _promote_unheld(pods, claims, out)
    network.request_fences(fences)
    network.publish(list(claims.values()) + out.create)
    # one write per claim: the last content wins
    last = {_key(c): c for c in out.update}
    out.update = list(last.values())
    return out


def progress_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANN_COPY)
    return dict(json.loads(raw)) if raw else {}
