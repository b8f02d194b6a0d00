"""The sim's storage: PersistentVolumeClaims that hold data, and the data movers between sims.

* **Claims.** A StatefulSet's ``volumeClaimTemplates`` become one Bound claim per template and
  ordinal, ``<template>-<statefulset>-<ordinal>``, as the StatefulSet controller makes them (kept
  when the StatefulSet goes, as Kubernetes' default retention keeps them). A claim's content is
  its used bytes and a write counter, in annotations (``sim.drods.io/used-bytes``, ``…/writes``);
  the template's ``sim.drods.io/used-bytes`` annotation sets what a new claim starts with.
* **Writes.** A Ready pod whose template says ``sim.drods.io/write-rate`` (writes per second, each
  ``sim.drods.io/write-bytes``, default 4096) advances its claims' counters — unless a claim is
  fenced read-only (``sim.drods.io/read-only``) or is a copy not yet promoted (``…/replica-of``).
* **The network between sims.** Sims sharing a state directory publish their claims' content to
  ``<state dir>/volumes/<sim>.json`` every pass; a sim asks another to fence claims by writing
  ``<state dir>/volumes/fences/<source>/<requester>.json`` (held while the asking Job exists).
* **Movers.** A VolumeCopy Job pod (env ``MIGRATION_CLAIM``) in the target pulls its claim from
  ``MIGRATION_SOURCE_CLUSTER`` at the sim's ``volume_bandwidth_mbps``: ``copy`` and ``catchup``
  runs move what the source held when they started, then end; a ``catchup`` run with
  ``MIGRATION_FOLLOW`` keeps following the source until deleted; a ``final`` run fences the source,
  moves the rest and promotes the copy. A lag probe pod (env ``MIGRATION_MAX_LAG_SECONDS``) ends,
  after the sim's Job run time, with exit 0 when every copy of its workload's claims in this sim
  lags its source by at most that many seconds of writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
ANN_USED_BYTES = "sim.drods.io/used-bytes"
ANN_WRITES = "sim.drods.io/writes"
ANN_WRITTEN_AT = "sim.drods.io/written-at"  # the time up to which writes are counted
ANN_WRITE_RATE = "sim.drods.io/write-rate"
ANN_WRITE_BYTES = "sim.drods.io/write-bytes"
ANN_READ_ONLY = "sim.drods.io/read-only"
ANN_REPLICA_OF = "sim.drods.io/replica-of"
ANN_CHECKSUM = "sim.drods.io/checksum"
ANN_COPY = "sim.drods.io/copy"  # on a mover pod: its progress, JSON
DEFAULT_WRITE_BYTES = 4096


def _ann(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _num(text: Any, default: float = 0.0) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return default


def checksum(bytes_: int, writes: int) -> str:
    """What a claim's content hashes to: equal content, equal checksum."""
    return hashlib.sha256(f"{bytes_}:{writes}".encode()).hexdigest()[:16]


def _storage_request(template: Mapping[str, Any]) -> str:
    return str((((template.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage") or "1Gi")


def provision(statefulsets: Iterable[Obj], claims: Mapping[tuple[str, str], Obj], stamp: str) -> list[Obj]:
    """The claims the StatefulSets' templates call for that do not exist yet, Bound."""
    out: list[Obj] = []
    for s in statefulsets:
        meta, spec = s["metadata"], s.get("spec") or {}
        ns = str(meta.get("namespace") or "default")
        for i in range(int(spec.get("replicas", 1))):
            for t in spec.get("volumeClaimTemplates") or []:
                tmeta = t.get("metadata") or {}
                name = f"{tmeta.get('name')}-{meta['name']}-{i}"
                if (ns, name) in claims:
                    continue
                used = int(_num(_ann(t).get(ANN_USED_BYTES)))
                size = _storage_request(t)
                labels = {**(tmeta.get("labels") or {}), **((spec.get("selector") or {}).get("matchLabels") or {})}
                out.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": name, "namespace": ns, "labels": labels,
                                         "annotations": {ANN_USED_BYTES: str(used), ANN_WRITES: "0",
                                                         ANN_WRITTEN_AT: stamp,
                                                         ANN_CHECKSUM: checksum(used, 0)}},
                            "spec": {**(t.get("spec") or {}), "volumeName": f"pv-{ns}-{name}"},
                            "status": {"phase": "Bound", "accessModes": list((t.get("spec") or {}).get(
                                "accessModes") or ["ReadWriteOnce"]), "capacity": {"storage": size}}})
    return out


def pod_claims(pod: Mapping[str, Any]) -> list[str]:
    """The claims a pod mounts: its own volumes', and a StatefulSet pod's templates' by its ordinal."""
    spec = pod.get("spec") or {}
    return [str(v["persistentVolumeClaim"]["claimName"]) for v in spec.get("volumes") or []
            if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)]


def statefulset_claims(s: Mapping[str, Any], pod_name: str) -> list[str]:
    ordinal = pod_name.rsplit("-", 1)[-1]
    return [f"{(t.get('metadata') or {}).get('name')}-{s['metadata']['name']}-{ordinal}"
            for t in (s.get("spec") or {}).get("volumeClaimTemplates") or []]


def writable(claim: Mapping[str, Any]) -> bool:
    a = _ann(claim)
    return a.get(ANN_READ_ONLY) != "true" and not a.get(ANN_REPLICA_OF)


def set_content(claim: Obj, used: int, writes: int, at: float, **extra: Any) -> Obj:
    a = _ann(claim)
    a.update({ANN_USED_BYTES: str(used), ANN_WRITES: str(writes), ANN_WRITTEN_AT: f"{at:.3f}",
              ANN_CHECKSUM: checksum(used, writes)})
    if extra.get("rate") is not None:
        a[ANN_WRITE_RATE] = f"{float(extra['rate']):g}"
        a[ANN_WRITE_BYTES] = str(int(extra["write_bytes"]))
    return {**claim, "metadata": {**claim["metadata"], "annotations": a}}


@dataclass(frozen=True, slots=True)
class Published:
    """One claim as its sim published it."""

    used: int
    writes: int
    read_only: bool
    rate: float = 0.0
    write_bytes: int = DEFAULT_WRITE_BYTES


@dataclass
class Network:
    """The files through which sims sharing a state directory see each other's claims."""

    root: Path
    me: str
    _last: str = field(default="", repr=False)

    def publish(self, claims: Iterable[Obj]) -> None:
        doc = {f"{c['metadata'].get('namespace')}/{c['metadata']['name']}": {
            "used": int(_num(_ann(c).get(ANN_USED_BYTES))), "writes": int(_num(_ann(c).get(ANN_WRITES))),
            "readOnly": _ann(c).get(ANN_READ_ONLY) == "true", "rate": _num(_ann(c).get(ANN_WRITE_RATE)),
            "writeBytes": int(_num(_ann(c).get(ANN_WRITE_BYTES), DEFAULT_WRITE_BYTES))} for c in claims}
        text = json.dumps(doc, sort_keys=True)
        if text != self._last:
            _write_atomic(self.root / f"{self.me}.json", text)
            self._last = text

    def read(self, sim: str) -> dict[str, Published]:
        try:
            doc = json.loads((self.root / f"{sim}.json").read_text())
        except (OSError, ValueError):
            return {}
        return {k: Published(int(v["used"]), int(v["writes"]), bool(v["readOnly"]), float(v.get("rate") or 0),
                             int(v.get("writeBytes") or DEFAULT_WRITE_BYTES)) for k, v in doc.items()}

    def request_fences(self, by_source: Mapping[str, set[str]]) -> None:
        """The claims this sim holds fenced in each source (all others it asked for are released)."""
        for source_dir in (self.root / "fences").glob("*") if (self.root / "fences").exists() else ():
            if source_dir.name not in by_source:
                with contextlib.suppress(OSError):
                    (source_dir / f"{self.me}.json").unlink()
        for source, claims in by_source.items():
            _write_atomic(self.root / "fences" / source / f"{self.me}.json", json.dumps(sorted(claims)))

    def fenced(self) -> set[str]:
        """The claims of this sim that another sim holds fenced."""
        out: set[str] = set()
        for f in (self.root / "fences" / self.me).glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                out |= set(json.loads(f.read_text()))
        return out


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


@dataclass
class StoragePass:
    """What one pass of the storage model wants written."""

    create: list[Obj] = field(default_factory=list)  # new claims
    update: list[Obj] = field(default_factory=list)  # claims with new content or fencing
    pods: list[Obj] = field(default_factory=list)  # mover pods with new progress
    finished: list[tuple[Obj, int, str]] = field(default_factory=list)  # mover pods that ended: exit code, message
    reports: list[tuple[Obj, Obj]] = field(default_factory=list)  # (mover pod, what it writes on its Job)


@dataclass
class WriteClock:
    """Since when each claim has had a Ready writer (in memory: a pause never turns into a burst)."""

    since: dict[tuple[str, str], float] = field(default_factory=dict)

    def writes(self, claim: Obj, rate: float, write_bytes: int, now: float) -> Obj | None:
        key = (str(claim["metadata"].get("namespace")), str(claim["metadata"]["name"]))
        start = self.since.get(key)
        if start is None:
            self.since[key] = now
            return None
        n = math.floor(rate * (now - start))
        if n <= 0:
            return None
        self.since[key] = start + n / rate
        a = _ann(claim)
        return set_content(claim, int(_num(a.get(ANN_USED_BYTES))) + n * write_bytes,
                           int(_num(a.get(ANN_WRITES))) + n, now, rate=rate, write_bytes=write_bytes)

    def keep_only(self, keys: set[tuple[str, str]]) -> None:
        for k in [k for k in self.since if k not in keys]:
            del self.since[k]
