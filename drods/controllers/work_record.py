"""A Work as the member controllers cache it: what they read, without its manifests.

At 100,000 bindings the store holds a Work per (binding, cluster), each with the final manifests of
its workload and dependents (a few KB decoded); the shared informer of Works held every one of them
decoded, which took the controllers past 2 GB. What the controllers read of a cached Work is small:
its cluster and binding, the hash of its manifest set, the names of the objects in it (the member's
cleanup asks which live Work wants an object), a few metadata fields and its status. The manifests themselves are
read only to apply a Work or to write it whole — the execution controller, a status write, the
removal mark — and those read the one Work from the store (`MemberFleet.work_object`), at the
revision the record was cached at, so nothing older is ever written back.

Whether the binding controller's Work still holds what it would write is asked of ``digest``: the
digest of the stored manifests, taken when the record is made (a Work edited behind DRO-DS's back
under the same ``spec.hash`` is written again, as before).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from drods.model import jsondoc
from drods.model.annotations import REMOVING_SINCE
from drods.model.kinds import WORK
from drods.model.packing import Packer
from drods.model.work import Ref, work_labels
from drods.store import KeyValue

Obj = dict[str, Any]


def manifests_digest(manifests: list[Any]) -> bytes:
    """The digest of a manifest list as stored (canonical JSON: equal lists, equal digests)."""
    return hashlib.blake2b(jsondoc.canonical(manifests), digest_size=16).digest()


# Work statuses as the records keep them: 100,000 Works repeat the shape of a few kinds' statuses
STATUS_BYTES = Packer()


@dataclass(frozen=True, slots=True)
class WorkRecord:
    """One cached Work: its identity, what it wants where, the metadata the controllers compare, and
    its status — kept encoded and packed (~0.7 KB encoded where decoded it took ~1.3), decoded by whoever reads it, with
    the two fields every Work event is sorted by decoded."""

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
    labeled: bool  # its labels are ``work_labels(binding, cluster)``, as the binding controller writes them
    removing_since: str | None  # the ``REMOVING_SINCE`` annotation
    applied: bool  # ``status.applied``
    observed_hash: str  # ``status.observedHash``
    packed_status: bytes  # ``status``, encoded and packed (``STATUS_BYTES``): ~0.7 KB → ~0.15
    generation: int = 0  # ``metadata.generation``: one more at each change of the spec
    observed_generation: int = 0  # ``status.observedGeneration`` (0: the applier did not say)

    @property
    def key(self) -> str:
        return WORK.key(self.name)

    @property
    def main(self) -> Ref | None:
        """The Work's main object (the workload): the last manifest."""
        return self.refs[-1] if self.refs else None

    @property
    def observes_this_generation(self) -> bool:
        """The status is about this write of the spec, or its applier did not say which (the hash
        alone repeats when a spec changes back)."""
        return self.observed_generation in (0, self.generation)

    @property
    def holds_current(self) -> bool:
        """Does the status say the member holds this spec: applied, of this hash and generation?"""
        return self.applied and self.observed_hash == self.hash and self.observes_this_generation

    @property
    def status(self) -> Obj:
        """``status``, decoded for this caller (its own copy)."""
        out: Obj = jsondoc.loads(self.encoded_status)
        return out

    @property
    def encoded_status(self) -> bytes:
        return STATUS_BYTES.unpack(self.packed_status)


def work_record(obj: Mapping[str, Any], revision: int) -> WorkRecord | None:
    """``obj`` (a Work document) as the controllers cache it; None when it is not one."""
    meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
    if not isinstance(meta, dict) or not isinstance(spec, dict) or not meta.get("name"):
        return None
    manifests = spec.get("manifests")
    manifests = manifests if isinstance(manifests, list) else []
    status = status if isinstance(status, dict) else {}
    share = jsondoc.shared_strings.share  # 200,000 Works repeat a few clusters, kinds and namespaces
    binding, cluster = str(spec.get("binding") or ""), share(str(spec.get("cluster") or ""))
    removing = (meta.get("annotations") or {}).get(REMOVING_SINCE)
    return WorkRecord(
        name=str(meta["name"]), revision=revision, cluster=cluster, binding=binding,
        hash=str(spec.get("hash") or ""), digest=manifests_digest(manifests),
        refs=tuple(_ref(m, share) for m in manifests if isinstance(m, dict)),
        suspended=bool(spec.get("suspendDispatching")), deleting=bool(meta.get("deletionTimestamp")),
        finalizers=tuple(share(str(f)) for f in meta.get("finalizers") or []),
        labeled=meta.get("labels") == work_labels(binding, cluster),
        removing_since=None if removing is None else str(removing),
        applied=bool(status.get("applied")), observed_hash=str(status.get("observedHash") or ""),
        packed_status=STATUS_BYTES.pack(jsondoc.dumps(status)), generation=_int(meta.get("generation")),
        observed_generation=_int(status.get("observedGeneration")))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ref(manifest: Obj, share: Callable[[str], str]) -> Ref:
    r = Ref.of(manifest)
    return Ref(share(r.api_version), share(r.kind), share(r.namespace), r.name)


def decode_work(kv: KeyValue) -> WorkRecord | None:
    """The shared informer of Works' decoder: a record, the manifests let go (see the module doc)."""
    try:
        obj = jsondoc.loads(kv.value)
    except ValueError:
        return None
    return work_record(obj, kv.mod_revision) if isinstance(obj, dict) else None


class RecentWorks:
    """The shared informer of Works' decoder (`decode_work`), which also keeps the last ``size`` Works
    it decoded as they were stored. A Work is applied, and its status written, moments after its
    event reached the informer; reading it back from the store for that cost a read, a decryption
    and a decode each time, ~7 % of the controllers' CPU in a stream of 50 operations a second. A
    Work older than that window is read from the store, as before."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._kept: OrderedDict[str, KeyValue] = OrderedDict()

    def __call__(self, kv: KeyValue) -> WorkRecord | None:
        record = decode_work(kv)
        if record is not None:
            self._kept[kv.key] = kv
            self._kept.move_to_end(kv.key)
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return record

    def at(self, key: str, revision: int) -> KeyValue | None:
        """The stored Work under ``key`` at ``revision``, if it is among the last ones decoded."""
        kv = self._kept.get(key)
        return kv if kv is not None and kv.mod_revision == revision else None


def with_status(obj: Mapping[str, Any], status: Mapping[str, Any]) -> bytes:
    """The stored bytes of ``obj`` (a Work read from the store) with ``status`` replaced."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return jsondoc.dumps({**obj, "metadata": meta, "status": dict(status)})
