"""Which PersistentVolumeClaims hold a workload's data, and how a data Job mounts them.

A workload keeps data when its StatefulSet has ``volumeClaimTemplates`` (one claim per template and
ordinal, named ``<template>-<statefulset>-<ordinal>`` as the StatefulSet controller names them) or
its pod template mounts a ``persistentVolumeClaim`` volume (one claim shared by every replica). A
plan that moves such a workload must say how the data goes (``spec.data``), or that it does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
VOLUMES_ROOT = "/migration/volumes"  # a Hook Job sees every claim at VOLUMES_ROOT/<claim>


@dataclass(frozen=True, slots=True)
class Claims:
    """The claims of a workload: per-replica templates, claims shared by all replicas, and where the
    workload's containers mount each volume (by volume name)."""

    templates: tuple[str, ...] = ()
    shared: dict[str, str] = field(default_factory=dict)  # volume name → claim name
    mount_paths: dict[str, str] = field(default_factory=dict)  # volume name → the first container's mountPath

    def __bool__(self) -> bool:
        return bool(self.templates or self.shared)

    def names(self, workload: str, replicas: int) -> list[str]:
        """Every claim name, per-replica ones for ordinals 0 … replicas-1 first."""
        out = [f"{t}-{workload}-{i}" for i in range(max(replicas, 1)) for t in self.templates]
        return out + sorted(set(self.shared.values()))

    def describe(self) -> str:
        parts = [f"volumeClaimTemplates {', '.join(self.templates)}"] if self.templates else []
        if self.shared:
            parts.append(f"claims {', '.join(sorted(set(self.shared.values())))}")
        return " and ".join(parts)


def workload_claims(workload: Mapping[str, Any] | None) -> Claims:
    spec = (workload or {}).get("spec") or {}
    pod = ((spec.get("template") or {}).get("spec")) or {}
    templates = tuple(str((t.get("metadata") or {}).get("name")) for t in spec.get("volumeClaimTemplates") or []
                      if isinstance(t, dict) and (t.get("metadata") or {}).get("name"))
    shared = {str(v["name"]): str(v["persistentVolumeClaim"]["claimName"]) for v in pod.get("volumes") or []
              if isinstance(v, dict) and v.get("name") and isinstance(v.get("persistentVolumeClaim"), dict)
              and v["persistentVolumeClaim"].get("claimName")}
    mounts: dict[str, str] = {}
    for c in pod.get("containers") or []:
        for m in (c or {}).get("volumeMounts") or []:
            if isinstance(m, dict) and m.get("name") and m.get("mountPath"):
                mounts.setdefault(str(m["name"]), str(m["mountPath"]))
    return Claims(templates, shared, mounts)


def mount_claims(pod: Obj, claims: Claims, workload: str, replicas: int) -> list[str]:
    """Mount the workload's claims into a hook Job's pod: each at ``VOLUMES_ROOT/<claim>``, and the
    first replica's (ordinal 0, the primary of a replicated store) and the shared ones also at the
    path the workload's containers use, so a copy written "to the data directory" lands in the claim.
    Returns the paths under VOLUMES_ROOT."""
    volumes: list[Obj] = list(pod.get("volumes") or [])
    taken = {str(v.get("name")) for v in volumes if isinstance(v, dict)}
    at_home: dict[str, str] = {f"{t}-{workload}-0": t for t in claims.templates}
    at_home.update({claim: vol for vol, claim in claims.shared.items()})
    paths: list[str] = []
    mounts: list[Obj] = []
    for i, claim in enumerate(claims.names(workload, replicas)):
        name = f"migration-claim-{i}"
        if name in taken:
            continue
        volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": name, "mountPath": f"{VOLUMES_ROOT}/{claim}"})
        paths.append(f"{VOLUMES_ROOT}/{claim}")
        home = claims.mount_paths.get(at_home.get(claim, ""))
        if home:
            mounts.append({"name": name, "mountPath": home})
    pod["volumes"] = volumes
    for c in pod.get("containers") or []:
        own = {str(m.get("mountPath")) for m in c.get("volumeMounts") or [] if isinstance(m, dict)}
        c["volumeMounts"] = list(c.get("volumeMounts") or []) + [m for m in mounts if m["mountPath"] not in own]
    return paths
