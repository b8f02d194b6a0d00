"""A Work as the member controllers cache it: what they read, without its manifests.

At 100,000 bindings the store holds a Work per (binding, cluster), each with the final manifests of
its workload and dependents (a few KB decoded); the shared informer of Works held every one of them
decoded, which took the controllers past 2 GB. What the controllers read of a cached Work is small:
its cluster and binding, the hash of its manifest set, the names of the objects in it (the member's
cleanup asks which live Work wants an object), its metadata and status. The manifests themselves are
read only to apply a Work or to write it whole — the execution controller, a status write, the
removal mark — and those read the one Work from the store (`MemberFleet.work_object`), at the
revision the record was cached at, so nothing older is ever written back.

Whether the binding controller's Work still holds what it would write is asked of ``digest``: the
digest of the stored manifests, taken when the record is made (a Work edited behind DRO-DS's back
under the same ``spec.hash`` is written again, as before).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from drods.model import jsondoc
from drods.model.work import Ref
from drods.store import KeyValue

Obj = dict[str, Any]


def manifests_digest(manifests: list[Any]) -> bytes:
    """The digest of a manifest list as stored (canonical JSON: equal lists, equal digests)."""
    return hashlib.blake2b(jsondoc.canonical(manifests), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class WorkRecord:
    """One cached Work: its identity, what it wants where, its metadata and status."""

    key: str
    name: str
    revision: int  # the store's mod revision: the compare-and-swap guard of every write
    cluster: str
    binding: str
    hash: str  # ``spec.hash``: names the manifest set
    digest: bytes  # ``manifests_digest`` of ``spec.manifests``
    refs: tuple[Ref, ...]  # the manifests' objects, in apply order (the main one last)
    suspended: bool  # ``spec.suspendDispatching``
    deleting: bool  # ``metadata.deletionTimestamp`` is set
    finalizers: tuple[str, ...]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    status: Mapping[str, Any]

    @property
    def main(self) -> Ref | None:
        """The Work's main object (the workload): the last manifest."""
        return self.refs[-1] if self.refs else None


def work_record(obj: Mapping[str, Any], key: str, revision: int) -> WorkRecord | None:
    """``obj`` (a Work document) as the controllers cache it; None when it is not one."""
    meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return None
    manifests = spec.get("manifests")
    manifests = manifests if isinstance(manifests, list) else []
    share = jsondoc.shared_strings.share  # 200,000 Works repeat a few clusters, kinds and conditions
    return WorkRecord(
        key=key, name=str(meta.get("name") or ""), revision=revision,
        cluster=share(str(spec.get("cluster") or "")), binding=str(spec.get("binding") or ""),
        hash=str(spec.get("hash") or ""), digest=manifests_digest(manifests),
        refs=tuple(_ref(m, share) for m in manifests if isinstance(m, dict)),
        suspended=bool(spec.get("suspendDispatching")), deleting=bool(meta.get("deletionTimestamp")),
        finalizers=tuple(share(str(f)) for f in meta.get("finalizers") or []),
        labels=jsondoc.kept(dict(meta.get("labels") or {})),
        annotations=jsondoc.kept(dict(meta.get("annotations") or {})),
        status=jsondoc.kept(status) if isinstance(status, dict) else {})


def _ref(manifest: Obj, share: Callable[[str], str]) -> Ref:
    r = Ref.of(manifest)
    return Ref(share(r.api_version), share(r.kind), share(r.namespace), r.name)


def decode_work(kv: KeyValue) -> WorkRecord | None:
    """The shared informer of Works' decoder: a record, the manifests let go (see the module doc)."""
    try:
        obj = jsondoc.loads(kv.value)
    except ValueError:
        return None
    return work_record(obj, kv.key, kv.mod_revision) if isinstance(obj, dict) else None


def with_status(obj: Mapping[str, Any], status: Mapping[str, Any]) -> bytes:
    """The stored bytes of ``obj`` (a Work read from the store) with ``status`` replaced."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return jsondoc.dumps({**obj, "metadata": meta, "status": dict(status)})
