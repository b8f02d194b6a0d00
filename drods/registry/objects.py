"""The object registry: Kubernetes-style CRUD, patch, finalizers and watch over the store.

Every component reads and writes objects through this class, so the rules live in one place:
resourceVersion is the store's mod revision (a stale one is a 409), spec changes bump
``generation``, secret fields are sealed before they reach the store, and deletion of an object
with finalizers only marks it until the last finalizer is removed.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from drods.errors import (
    ApiError,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    already_exists,
    bad_request,
    conflict,
    field_errors_of,
    not_found,
    validation_failed,
)
from drods.model import jsondoc
from drods.model.binding import without_reasons
from drods.model.builtin_fields import model_name, unknown_or_misshapen
from drods.model.immutable_fields import check_update
from drods.model.kinds import SECRET, Kind
from drods.model.meta import ObjectMeta, check_name
from drods.model.namespaces import FINALIZE, IMMORTAL, NAMESPACE, defaulted, finalized, kept_on_update, labelled, marked
from drods.model.secret_data import normalised_secret
from drods.model.selector import LabelSelector
from drods.model.timefmt import now_rfc3339
from drods.registry import changes
from drods.registry.secrets import SecretBox
from drods.store import CasFailed, Compare, EventType, KeyValue, Put, Store
from drods.store.cas import read_modify_write

Obj = dict[str, Any]
_Upsert = tuple[Kind, str, Obj, int]  # kind, store key, the object to write, the revision it replaces (0: new)

# A check of an object against others before it is written (e.g. one autoscaler per workload);
# raises ApiError to refuse.
Admission = Callable[["ObjectRegistry", Kind, Obj], Awaitable[None]]


def field_errors(exc: ValidationError, prefix: str = "") -> list[dict[str, Any]]:
    return field_errors_of(exc.errors(), prefix)


class ObjectRegistry:
    def __init__(self, store: Store, secrets: SecretBox, admission: Sequence[Admission] = ()) -> None:
        self.store = store
        self.secrets = secrets
        self.admission = tuple(admission)

    def with_store(self, store: Store) -> ObjectRegistry:
        """The same registry over another view of the store (e.g. one whose writes are fenced)."""
        return type(self)(store, self.secrets, self.admission)

    async def _admit(self, kind: Kind, obj: Obj) -> None:
        for check in self.admission:
            await check(self, kind, obj)

    # ---- validation -------------------------------------------------------------------------

    def validate(self, kind: Kind, obj: Any, *, namespace: str | None = None, trusted: bool = False) -> Obj:
        """Check shape and schema; return the normalised object (as given, plus identity fields).
        ``trusted``: a spec a controller built is taken as it is (its schema is not checked)."""
        if not isinstance(obj, dict):
            raise validation_failed("object must be a JSON/YAML mapping")
        api_version, obj_kind = obj.get("apiVersion"), obj.get("kind")
        if api_version is not None and api_version != kind.api_version:
            raise validation_failed(
                f"apiVersion must be {kind.api_version!r}",
                [{"field": "apiVersion", "message": f"expected {kind.api_version!r}, got {api_version!r}"}],
            )
        if obj_kind is not None and obj_kind != kind.kind:
            raise validation_failed(
                f"kind must be {kind.kind!r}",
                [{"field": "kind", "message": f"expected {kind.kind!r}, got {obj_kind!r}"}],
            )
        allowed = {"apiVersion", "kind", "metadata", "spec", "status"}
        if kind.spec_model is None:
            allowed |= set(obj) - {"metadata"}  # workload templates are kept as given
        unknown = sorted(set(obj) - allowed)
        if unknown:
            raise validation_failed(
                f"unknown field(s): {', '.join(unknown)}",
                [{"field": f, "message": "unknown field"} for f in unknown],
            )
        try:
            meta = ObjectMeta.model_validate(obj.get("metadata") or {})
        except ValidationError as e:
            raise validation_failed("invalid metadata", field_errors(e, "metadata.")) from e
        if not meta.name:
            raise validation_failed("metadata.name is required", [{"field": "metadata.name", "message": "required"}])
        # Once the name is known, errors name the object (kubectl: 'The Binding "web" is invalid: …').
        ident = {"kind": kind.kind, "group": kind.group, "name": meta.name}
        try:
            check_name(meta.name)
        except ValueError as e:
            raise validation_failed(
                f"invalid name {meta.name!r}", [{"field": "metadata.name", "message": str(e)}], **ident
            ) from e
        if kind.namespaced:
            ns = meta.namespace or namespace or "default"
            if namespace and meta.namespace and meta.namespace != namespace:
                raise bad_request(
                    f"the namespace of the object ({meta.namespace}) does not match the namespace "
                    f"of the request ({namespace})"
                )
            meta.namespace = ns
        else:
            meta.namespace = None
        out = dict(obj)
        out["apiVersion"] = kind.api_version
        out["kind"] = kind.kind
        out["metadata"] = meta.model_dump(exclude_defaults=True)
        if kind.spec_model is not None:
            spec = obj.get("spec")
            if spec is None:
                spec = {}
            if not isinstance(spec, dict):
                raise validation_failed("spec must be a mapping", [{"field": "spec", "message": "not a mapping"}],
                                        **ident)
            if not trusted:
                try:
                    model: BaseModel = kind.spec_model.model_validate(spec)
                except ValidationError as e:
                    raise validation_failed(f"invalid {kind.kind} spec", field_errors(e, "spec."), **ident) from e
                out["spec"] = model.model_dump(mode="json", exclude_unset=True)
        status = obj.get("status")
        if status is not None and not isinstance(status, dict):
            raise validation_failed("status must be a mapping", [{"field": "status", "message": "not a mapping"}],
                                    **ident)
        if kind.custom is None and kind.scale_paths is not None:
            _check_replicas(out, ident)
        if kind.spec_model is None and kind.custom is None and not trusted:
            _check_built_in_fields(kind, out, ident)
        if kind is NAMESPACE:  # its name label is kept, as kube-apiserver keeps it, whatever a write says
            out = labelled(out)
        if kind is SECRET:
            out, errors = normalised_secret(out)
            if errors:
                raise validation_failed(f'Secret "{meta.name}" is invalid', errors, **ident)
        if kind.custom is not None:  # a CRD's structural schema: prune unknown fields, then check the rest
            out, errors = kind.custom.admit(out)
            if errors:
                raise validation_failed(f'{kind.kind}.{kind.group} "{meta.name}" is invalid', errors, **ident)
        return out

    # ---- reads ------------------------------------------------------------------------------

    def decode(self, kind: Kind, kv: KeyValue, *, reveal: bool = False) -> Obj:
        """A stored object as the API returns it (``reveal``: its secret fields in the clear)."""
        obj: Obj = jsondoc.loads(kv.value)
        obj["metadata"]["resourceVersion"] = str(kv.mod_revision)
        if obj.get("kind") == kind.kind:
            # read in the version asked for: a custom kind's other served versions (conversion None) and
            # kinds sharing one storage differ only in apiVersion
            obj["apiVersion"] = kind.api_version
        if kind.secret_paths and isinstance(obj.get("spec"), dict):
            obj["spec"] = (
                self.secrets.reveal(obj["spec"], kind.secret_paths)
                if reveal
                else self.secrets.redact(obj["spec"], kind.secret_paths)
            )
        return obj

    async def get(self, kind: Kind, name: str, namespace: str | None = None, *, reveal: bool = False) -> Obj:
        kv = await self.store.get(kind.key(name, self._ns(kind, namespace)))
        if kv is None:
            raise not_found(kind.kind, name)
        return self.decode(kind, kv, reveal=reveal)

    async def try_get(self, kind: Kind, name: str, namespace: str | None = None, *, reveal: bool = False) -> Obj | None:
        try:
            return await self.get(kind, name, namespace, reveal=reveal)
        except NotFound:
            return None

    async def list(  # noqa: A003 - the Kubernetes verb
        self,
        kind: Kind,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
        *,
        reveal: bool = False,
    ) -> tuple[list[Obj], int]:
        kvs, revision = await self.store.range(kind.key_prefix(namespace if kind.namespaced else None))
        items = [self.decode(kind, kv, reveal=reveal) for kv in kvs]
        if selector is not None:
            items = [o for o in items if selector.matches(o["metadata"].get("labels", {}))]
        return items, revision

    async def stored_page(self, kind: Kind, namespace: str | None, *, limit: int = 0,
                          after: str = "") -> tuple[builtins.list[KeyValue], int, str]:
        """``list_page`` (or ``list``, ``limit`` 0) without a filter, as stored: for an answer that
        decodes one object at a time (`decode`) as it renders them."""
        prefix = kind.key_prefix(namespace if kind.namespaced else None)
        # one more than the page: a page that ends the kind says so (no ``continue`` to an empty page)
        kvs, revision = await self.store.range(prefix, limit=limit + 1 if limit else 0, after=after)
        if limit and len(kvs) > limit:
            del kvs[limit:]
            return kvs, revision, kvs[-1].key
        return kvs, revision, ""

    async def list_page(self, kind: Kind, namespace: str | None, matches: Callable[[Obj], bool] | None, *,
                        limit: int, after: str = "") -> tuple[builtins.list[Obj], int, str]:
        """At most ``limit`` objects ``matches`` accepts, in key order from the first key after
        ``after`` (a key under the kind's prefix; "" for the first page); the store revision of the
        first read; and the key the next page goes on from ("" when nothing is left). The store is
        read ``limit`` keys at a time until the page is full, so a selective page reads more than
        it returns but never the whole kind at once."""
        prefix = kind.key_prefix(namespace if kind.namespaced else None)
        items: builtins.list[Obj] = []
        revision = 0
        cursor = after
        while True:
            kvs, rev = await self.store.range(prefix, limit=limit, after=cursor)
            revision = revision or rev
            for i, kv in enumerate(kvs):
                obj = self.decode(kind, kv)
                if matches is None or matches(obj):
                    items.append(obj)
                    if len(items) == limit:
                        more = i < len(kvs) - 1 or len(kvs) == limit
                        return items, revision, kv.key if more else ""
            if len(kvs) < limit:
                return items, revision, ""
            cursor = kvs[-1].key

    async def scan(self, kind: Kind, namespace: str | None = None, *, reveal: bool = False) -> Iterator[Obj]:
        """Every object of ``kind``, decoded one at a time as the caller iterates: a pass over
        100,000 Bindings holds their stored bytes, not 100,000 decoded documents at once."""
        kvs, _ = await self.store.range(kind.key_prefix(namespace if kind.namespaced else None))
        return (self.decode(kind, kv, reveal=reveal) for kv in kvs)

    # ---- writes -----------------------------------------------------------------------------

    async def create(self, kind: Kind, obj: Any, namespace: str | None = None, *, dry_run: bool = False) -> Obj:
        """``dry_run``: everything a create does (validation, defaulting, the name check) but the write.
        An object with ``metadata.generateName`` and no name is named from it (`generated_name`)."""
        obj = self.validate(kind, with_generated_name(obj), namespace=namespace)
        await self._admit(kind, obj)
        if kind is NAMESPACE:
            obj = defaulted(obj)
        meta = obj["metadata"]
        if kind.namespaced:
            await self._refuse_terminating({meta["namespace"]})
        for f in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(f, None)
        meta["uid"] = str(uuid.uuid4())
        meta["generation"] = 1
        meta["creationTimestamp"] = now_rfc3339()
        _initial_status(kind, obj)
        self._seal(kind, obj, None)
        key = kind.key(meta["name"], meta.get("namespace"))
        if dry_run:
            if await self.store.get(key) is not None:
                raise already_exists(kind.kind, meta["name"])
            return self._planned(kind, obj, 0)
        try:
            rev = await self.store.put(key, _encode(obj), expect_revision=0)
        except CasFailed as e:
            raise already_exists(kind.kind, meta["name"]) from e
        await changes.note(kind, "create", meta["name"], meta.get("namespace"), None, obj)
        return self._result(kind, obj, rev)

    async def update(
        self, kind: Kind, obj: Any, namespace: str | None = None, *, subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """PUT semantics: with metadata.resourceVersion it is a CAS, without it last-writer-wins
        (re-applied to the newer object when a concurrent writer wins the race)."""

        async def attempt(_: int) -> Obj:
            incoming = self.validate(kind, obj, namespace=namespace)
            if subresource is None:
                await self._admit(kind, incoming)
            meta = incoming["metadata"]
            key = kind.key(meta["name"], meta.get("namespace"))
            kv = await self.store.get(key)
            if kv is None:
                raise not_found(kind.kind, meta["name"])
            rv = meta.get("resourceVersion")
            if rv is not None and str(kv.mod_revision) != str(rv):
                raise conflict(kind.kind, meta["name"], str(kv.mod_revision))
            current: Obj = jsondoc.loads(kv.value)
            merged = self._carry_over(kind, current, incoming, subresource)
            if dry_run:
                return self._result(kind, merged, kv.mod_revision)
            return await self._write(kind, key, merged, current, kv.mod_revision)

        meta = obj.get("metadata") if isinstance(obj, dict) else None
        return await read_modify_write(attempt, retry=not (isinstance(meta, dict) and
                                                           meta.get("resourceVersion") is not None))

    async def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        content_type: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        from drods.registry.patch import apply_patch, sets_resource_version

        key = kind.key(name, self._ns(kind, namespace))
        precondition = sets_resource_version(patch, content_type)
        # A patch without a resourceVersion precondition is re-applied to the newer object when a
        # concurrent writer (e.g. a status update) wins the race, as the Kubernetes API server does.
        async def attempt(_: int) -> Obj:
            kv = await self.store.get(key)
            if kv is None:
                raise not_found(kind.kind, name)
            current = self.decode(kind, kv, reveal=False)
            patched = apply_patch(current, patch, content_type)
            meta = patched.get("metadata")
            rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
            if rv is not None and str(rv) != str(kv.mod_revision):
                raise conflict(kind.kind, name, str(kv.mod_revision))
            if isinstance(meta, dict) and meta.get("name", name) != name:
                raise bad_request("metadata.name cannot be changed by a patch")
            incoming = self.validate(kind, patched, namespace=namespace)
            if subresource is None:
                await self._admit(kind, incoming)
            stored: Obj = jsondoc.loads(kv.value)
            merged = self._carry_over(kind, stored, incoming, subresource)
            if dry_run:
                return self._result(kind, merged, kv.mod_revision)
            return await self._write(kind, key, merged, stored, kv.mod_revision)

        return await read_modify_write(attempt, retry=not precondition)

    async def update_status(self, kind: Kind, name: str, status: dict[str, Any], namespace: str | None = None,
                            *, resource_version: int | None = None, current: Obj | None = None,
                            spec: dict[str, Any] | None = None) -> Obj:
        """Controllers' status write: CAS on the revision they read (or the current one). With
        ``current`` (their informer's copy at ``resource_version``) the object is not read again. With
        ``spec`` the controller's own spec change goes in the same revision (a cluster's not-ready taint
        with its Ready condition: one write and one watch event where there were two), the generation
        moving as for any spec change."""
        key = kind.key(name, self._ns(kind, namespace))
        if current is not None and resource_version is not None:
            held = {**current, "metadata": {k: v for k, v in current["metadata"].items() if k != "resourceVersion"}}
            return await self._write(kind, key, _with_spec({**held, "status": status}, spec), held, resource_version)
        kv = await self.store.get(key)
        if kv is None:
            raise not_found(kind.kind, name)
        if resource_version is not None and kv.mod_revision != resource_version:
            raise conflict(kind.kind, name, str(kv.mod_revision))
        stored: Obj = jsondoc.loads(kv.value)
        new = {**stored, "status": status}  # freshly decoded: nothing else holds it, no deep copy needed
        return await self._write(kind, key, _with_spec(new, spec), stored, kv.mod_revision)

    async def delete(
        self, kind: Kind, name: str, namespace: str | None = None, *, resource_version: str | None = None,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """Returns (object, gone). With finalizers the object is only marked for deletion (a Namespace
        while its ``spec.finalizers`` hold it too: it turns Terminating, `drods.model.namespaces`)."""
        if kind is NAMESPACE and name in IMMORTAL:
            raise Forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                            {"name": name, "kind": "namespaces"})
        key = kind.key(name, self._ns(kind, namespace))

        async def attempt(_: int) -> tuple[Obj, bool]:
            kv = await self.store.get(key)
            if kv is None:
                raise not_found(kind.kind, name)
            if resource_version is not None and str(kv.mod_revision) != str(resource_version):
                raise conflict(kind.kind, name, str(kv.mod_revision))
            current: Obj = jsondoc.loads(kv.value)
            meta = current["metadata"]
            if dry_run:  # answered as the delete would leave it: marked (a Namespace Terminating) or gone
                held = _held(kind, current)
                answer = self.decode(kind, kv, reveal=False)
                return (_marked(kind, answer) if held and not meta.get("deletionTimestamp") else answer), not held
            try:
                if _held(kind, current):
                    if meta.get("deletionTimestamp"):
                        return self.decode(kind, kv, reveal=False), False
                    stamped = _marked(kind, current)
                    rev = await self.store.put(key, _encode(stamped), expect_revision=kv.mod_revision)
                    await changes.note(kind, "delete", name, meta.get("namespace"), current, stamped)
                    return self._result(kind, stamped, rev), False
                await self.store.delete(key, expect_revision=kv.mod_revision)
                await changes.note(kind, "delete", name, meta.get("namespace"), current, None)
                return self.decode(kind, kv, reveal=False), True
            except CasFailed:
                if resource_version is not None:
                    raise conflict(kind.kind, name, None) from None
                raise

        return await read_modify_write(attempt, retry=resource_version is None,
                                       exhausted=lambda: conflict(kind.kind, name, None))

    async def remove_finalizer(self, kind: Kind, name: str, finalizer: str, namespace: str | None = None) -> None:
        """Drop one finalizer; the object disappears when it was the last one on a deleted object."""
        key = kind.key(name, self._ns(kind, namespace))

        async def attempt(_: int) -> None:
            kv = await self.store.get(key)
            if kv is None:
                return
            current: Obj = jsondoc.loads(kv.value)
            fins = current["metadata"].get("finalizers", [])
            if finalizer not in fins:
                return
            current["metadata"]["finalizers"] = [f for f in fins if f != finalizer]
            if _finalized(kind, current) and current["metadata"].get("deletionTimestamp"):
                await self.store.delete(key, expect_revision=kv.mod_revision)
            else:
                await self.store.put(key, _encode(current), expect_revision=kv.mod_revision)

        await read_modify_write(attempt, exhausted=lambda: conflict(kind.kind, name, None))

    async def batch_upsert(self, items: builtins.list[tuple[Kind, Any]], *, results: bool = True,
                           dry_run: bool = False, trusted: bool = False,
                           current: Mapping[str, Obj] | None = None,
                           absent: Collection[str] = ()) -> builtins.list[tuple[Obj, bool]]:
        """Create or update many objects: all are validated before anything is written, then
        written in as few store transactions as the backend allows, each guarded by CAS.
        ``results=False``: return nothing (a controller publishing many objects skips the copies);
        ``dry_run`` plans every write and returns what would be, writing nothing; ``trusted``: the
        specs were built by a controller from typed values, so their schema is not checked again
        (the envelope and metadata still are); ``current``: by store key, objects as the caller last
        wrote or read them (with their resourceVersion) — those are not read again, the
        compare-and-swap on their resourceVersion still guards the write (a 409 if they moved);
        ``absent``: store keys the caller's cache holds nothing under — created without a read, the
        transaction's guard that they still do not exist answering for it (a 409 if they do)."""
        plans, before = await self._plan_upserts(items, trusted, current or {}, absent)
        if dry_run:
            return [(self._planned(kind, obj, rev), rev == 0) for kind, _, obj, rev in plans]
        chunk = max(1, self.store.max_txn_ops)
        out: builtins.list[tuple[Obj, bool]] = []
        written = 0
        for start in range(0, len(plans), chunk):
            part = plans[start:start + chunk]
            revision = await self._write_upserts(part, before, (), written)
            if results:
                out += [(self._result(kind, obj, revision), rev == 0) for kind, _, obj, rev in part]
            written += len(part)
        return out

    async def upsert_with(self, items: builtins.list[tuple[Kind, Any]], also: Sequence[tuple[Compare, Put]], *,
                          trusted: bool = False, current: Mapping[str, Obj] | None = None,
                          absent: Collection[str] = ()) -> int | None:
        """`batch_upsert` of ``items`` and the caller's own guarded ``also`` writes in ONE transaction
        (an object that must land with them, as the finalizer that covers a Binding's Works); its
        revision, or None when they do not fit in one (nothing written: the caller writes them apart).
        Conflict when any guard failed (nothing written)."""
        if len(items) + len(also) > max(1, self.store.max_txn_ops):
            return None
        plans, before = await self._plan_upserts(items, trusted, current or {}, absent)
        return await self._write_upserts(plans, before, also, 0)

    async def _plan_upserts(self, items: builtins.list[tuple[Kind, Any]], trusted: bool, known: Mapping[str, Obj],
                            absent: Collection[str]) -> tuple[builtins.list[_Upsert], dict[str, Obj]]:
        """Each item validated and admitted, then planned as a create (revision 0) or an update over
        what is stored; and, by store key, what an update replaces (its audit record is the difference)."""
        validated: builtins.list[tuple[Kind, Obj, str]] = []
        seen: set[str] = set()
        for i, (kind, raw) in enumerate(items):
            try:
                obj = self.validate(kind, raw, trusted=trusted)
            except ApiError as e:
                name = raw.get("metadata", {}).get("name") if isinstance(raw, dict) else None
                e.details.update({"index": i, "kind": kind.kind, "name": name})
                e.message = f"objects[{i}] ({kind.kind} {name!r}): {e.message}"
                raise
            key = kind.key(obj["metadata"]["name"], obj["metadata"].get("namespace"))
            if key in seen:
                raise validation_failed(f"objects[{i}] appears twice in the batch", index=i,
                                        name=obj["metadata"]["name"], kind=kind.kind)
            seen.add(key)
            await self._admit(kind, obj)
            validated.append((kind, obj, key))
        unknown = [key for _, _, key in validated if key not in known and key not in absent]
        read = dict(zip(unknown, await asyncio.gather(*(self.store.get(key) for key in unknown)), strict=True))
        await self._refuse_terminating({obj["metadata"]["namespace"] for kind, obj, key in validated
                                        if kind.namespaced and key not in known and read.get(key) is None})
        plans: builtins.list[_Upsert] = []
        before: dict[str, Obj] = {}
        for kind, obj, key in validated:
            held = known.get(key)
            if held is not None:
                rev = int(held["metadata"]["resourceVersion"])
                before[key] = held
                plans.append((kind, key, self._carry_over(kind, held, obj, None), rev))
                continue
            kv = read.get(key)
            if kv is None:
                if kind is NAMESPACE:
                    obj = defaulted(obj)
                meta = obj["metadata"]
                for f in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
                    meta.pop(f, None)
                meta.update(uid=str(uuid.uuid4()), generation=1, creationTimestamp=now_rfc3339())
                _initial_status(kind, obj)
                self._seal(kind, obj, None)
                plans.append((kind, key, obj, 0))
            else:
                before[key] = jsondoc.loads(kv.value)
                plans.append((kind, key, self._carry_over(kind, before[key], obj, None), kv.mod_revision))
        return plans, before

    async def _write_upserts(self, part: builtins.list[_Upsert], before: Mapping[str, Obj],
                             also: Sequence[tuple[Compare, Put]], written: int) -> int:
        """One transaction: ``part`` (each guarded by its planned revision) and ``also``; audited."""
        res = await self.store.txn(
            [*(Compare(key, "mod", "=", rev) for _, key, _, rev in part), *(c for c, _ in also)],
            [*(Put(key, _encode(obj)) for _, key, obj, _ in part), *(op for _, op in also)],
        )
        if not res.succeeded:
            raise Conflict("objects in the batch changed while it was written; retry", {"written": written})
        await changes.note_all([(kind, "create" if rev == 0 else "update", obj["metadata"]["name"],
                                 obj["metadata"].get("namespace"), before.get(key), obj)
                                for kind, key, obj, rev in part])
        return res.revision

    async def watch(
        self,
        kind: Kind,
        namespace: str | None = None,
        resource_version: int | None = None,
        selector: LabelSelector | None = None,
    ) -> AsyncIterator[tuple[str, Obj]]:
        """Kubernetes watch semantics: from ``resource_version`` (exclusive), or the current state first.
        With ``selector``, as a Kubernetes API server's watch cache: an object that stops matching is
        DELETED (its previous content at the change's resourceVersion), one that starts matching ADDED."""
        prefix = kind.key_prefix(namespace if kind.namespaced else None)
        if resource_version is None or resource_version == 0:
            items, rev = await self.list(kind, namespace, selector)
            for item in items:
                yield "ADDED", item
            start = rev + 1
        else:
            start = resource_version + 1
        async for ev in self.store.watch(prefix, start_revision=start):
            if ev.type is EventType.DELETE:
                if ev.prev_kv is None:
                    continue
                obj = self.decode(kind, ev.prev_kv, reveal=False)
                obj["metadata"]["resourceVersion"] = str(ev.kv.mod_revision)
                kind_of_event = "DELETED"
            else:
                obj = self.decode(kind, ev.kv, reveal=False)
                kind_of_event = "ADDED" if ev.kv.version == 1 else "MODIFIED"
                if selector is not None and ev.kv.version > 1 and ev.prev_kv is not None:
                    before = self.decode(kind, ev.prev_kv, reveal=False)
                    was, now = (selector.matches(o["metadata"].get("labels") or {}) for o in (before, obj))
                    if was and not now:
                        before["metadata"]["resourceVersion"] = str(ev.kv.mod_revision)
                        yield "DELETED", before
                        continue
                    if now and not was:
                        kind_of_event = "ADDED"
            if selector is not None and not selector.matches(obj["metadata"].get("labels", {})):
                continue
            yield kind_of_event, obj

    # ---- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _ns(kind: Kind, namespace: str | None) -> str | None:
        if not kind.namespaced:
            return None
        return namespace or "default"

    async def _refuse_terminating(self, namespaces: Collection[str]) -> None:
        """Nothing new goes into a Terminating namespace: the namespace controller is deleting what
        it holds, and a newcomer would outlive it (kube-apiserver's NamespaceLifecycle admission).
        A namespace that does not exist is no refusal here (objects may precede their namespace)."""
        asked = sorted(set(namespaces) - IMMORTAL)  # those are never deleted
        found = await asyncio.gather(*(self.store.get(NAMESPACE.key(ns)) for ns in asked))
        for ns, kv in zip(asked, found, strict=True):
            if kv is not None and jsondoc.loads(kv.value).get("metadata", {}).get("deletionTimestamp"):
                raise Forbidden(f"unable to create new content in namespace {ns} because it is being terminated",
                                {"name": ns, "kind": "namespaces"})

    def _carry_over(self, kind: Kind, current: Obj, incoming: Obj, subresource: str | None) -> Obj:
        """Keep server-owned fields; the status subresource changes only status, the main one only the rest."""
        meta, cur_meta = incoming["metadata"], current["metadata"]
        for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if f in cur_meta:
                meta[f] = cur_meta[f]
            else:
                meta.pop(f, None)
        meta.pop("resourceVersion", None)
        if subresource == "status":
            out = copy.deepcopy(current)
            out["status"] = incoming.get("status", {})
            return out
        if subresource is None and kind.custom is None:
            check_update(kind.group, kind.kind, str(meta.get("name")), current, incoming)
        if kind is NAMESPACE:
            if subresource == FINALIZE:  # spec.finalizers, and nothing else
                out = copy.deepcopy(current)
                out["spec"] = {**(current.get("spec") or {}),
                               "finalizers": (incoming.get("spec") or {}).get("finalizers") or []}
                return out
            incoming = kept_on_update(current, incoming)
        status_apart = kind.custom.status_subresource if kind.custom is not None else True
        if status_apart and (kind.spec_model is not None or "status" in current):
            incoming["status"] = current.get("status", {})
        elif status_apart and kind.custom is not None:
            incoming.pop("status", None)  # none written through the status subresource yet: still none
        if cur_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers", [])) - set(cur_meta.get("finalizers", []))
            if added:
                raise Invalid("no new finalizers can be added once deletion has started",
                              {"fields": [{"field": "metadata.finalizers", "message": "object is being deleted"}]})
        self._seal(kind, incoming, current)
        if _content(incoming) != _content(current):
            meta["generation"] = int(cur_meta.get("generation", 1)) + 1
        return incoming

    def _seal(self, kind: Kind, obj: Obj, previous: Obj | None) -> None:
        if kind.secret_paths and isinstance(obj.get("spec"), dict):
            prev_spec = previous.get("spec") if previous else None
            self.secrets.seal(obj["spec"], kind.secret_paths, prev_spec)

    async def _write(self, kind: Kind, key: str, new: Obj, current: Obj, revision: int) -> Obj:
        name = new["metadata"]["name"]
        if new == current:
            return self._result(kind, current, revision)
        try:
            rev = await self.store.put(key, _encode(new), expect_revision=revision)
        except CasFailed as e:
            raise conflict(kind.kind, name, str(e.current.mod_revision) if e.current else None) from e
        await changes.note(kind, "update", name, new["metadata"].get("namespace"), current, new)
        # A deleted object whose last finalizer was removed by this write goes away now.
        if new["metadata"].get("deletionTimestamp") and _finalized(kind, new):
            with contextlib.suppress(CasFailed):
                await self.store.delete(key, expect_revision=rev)
        return self._result(kind, new, rev)

    def _planned(self, kind: Kind, obj: Obj, revision: int) -> Obj:
        """A dry run's answer: a new object has no resourceVersion yet, an update keeps the current one."""
        out = self._result(kind, obj, revision)
        if revision == 0:
            del out["metadata"]["resourceVersion"]
        return out

    def _result(self, kind: Kind, obj: Obj, revision: int) -> Obj:
        """The answer to a call: ``obj`` with its resourceVersion. Only the top level and metadata are
        copied: every ``obj`` here was decoded or built for this call, so nothing else holds its parts."""
        out = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(revision)}}
        if kind.secret_paths and isinstance(out.get("spec"), dict):
            out["spec"] = self.secrets.redact(out["spec"], kind.secret_paths)
        return out


def decode_stored(kv: KeyValue) -> Obj | None:
    """A stored object as informers hand it to controllers: with ``metadata.resourceVersion`` (for
    compare-and-swap writes); None when the value is not an object."""
    return _decoded(kv, jsondoc.loads)


def _decoded(kv: KeyValue, loads: Callable[[bytes], Any]) -> Obj | None:
    try:
        obj = loads(kv.value)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("metadata"), dict):
        obj["metadata"]["resourceVersion"] = str(kv.mod_revision)
    return obj


def decode_shared(kv: KeyValue) -> Obj | None:
    """``decode_stored`` for a cache whose readers only read: equal values and parts are shared with
    the other documents decoded so (``jsondoc.loads_shared``); not for objects that hold secrets."""
    return _decoded(kv, jsondoc.loads_shared)


def decode_binding_kept(kv: KeyValue) -> Obj | None:
    """``decode_stored`` for the shared informer of Bindings: repeated values and parts shared
    (``jsondoc.loads_shared``; a Binding holds no secret, and every reader of the shared cache reads
    only), and without ``status.reasons`` (``without_reasons``; in a failure storm 100,000 cached
    Bindings each carried some)."""
    obj = decode_shared(kv)
    status = obj.get("status") if obj is not None else None
    if obj is not None and isinstance(status, dict) and (kept := without_reasons(status)) is not None:
        obj["status"] = kept
    return obj


_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes': no vowels, no look-alikes


def with_generated_name(obj: Any) -> Any:
    """``obj`` named ``generateName`` + five random characters when it asks for one (Kubernetes'
    ``metadata.generateName``); any other object as it is. A name taken is a 409, as in Kubernetes
    (the client creates again)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or meta.get("name") or not isinstance(meta.get("generateName"), str) \
            or not meta["generateName"]:
        return obj
    suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))
    return {**obj, "metadata": {**meta, "name": f"{meta['generateName'][:58]}{suffix}"}}


def _check_replicas(obj: Obj, ident: dict[str, Any]) -> None:
    """A built-in kind's ``spec.replicas`` is a whole number of at least 0, as the Kubernetes API
    server validates it (the rest of a built-in template is kept as given). A word or a negative
    count was stored, and the workload divided as one replica."""
    spec = obj.get("spec")
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise validation_failed("spec must be a mapping", [{"field": "spec", "message": "not a mapping"}], **ident)
    replicas = spec.get("replicas")
    if replicas is None:
        return
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise validation_failed(f'{ident["kind"]} "{ident["name"]}" is invalid: spec.replicas must be an integer',
                                [{"field": "spec.replicas", "message": f"must be an integer, got {replicas!r}"}],
                                **ident)
    if replicas < 0:
        raise validation_failed(f'{ident["kind"]} "{ident["name"]}" is invalid: spec.replicas must be greater '
                                "than or equal to 0",
                                [{"field": "spec.replicas", "message": "must be greater than or equal to 0"}],
                                **ident)


def _initial_status(kind: Kind, obj: Obj) -> None:
    """A new object's status: a custom resource with a status subresource has none until it is written
    through it (kube-apiserver drops it on create: an empty one fails a schema that requires status fields,
    and every later update of the object with it); others start empty."""
    if kind.custom is not None and kind.custom.status_subresource:
        obj.pop("status", None)
    else:
        obj.setdefault("status", {})


def _check_built_in_fields(kind: Kind, obj: Obj, ident: dict[str, Any]) -> None:
    """A built-in kind's fields as kube-apiserver's strict field validation takes them: a field its
    schema does not name, or a value of the wrong shape, is refused with every such field named."""
    model = model_name(kind.group, kind.version, kind.kind)
    if model is None:
        return
    errors = unknown_or_misshapen(obj, model)
    if errors:
        said = "; ".join(f"{e.field}: {e.message}" for e in errors)
        raise validation_failed(f'{kind.kind} "{ident["name"]}" is invalid: {said}', [e.as_json() for e in errors],
                                **ident)


def _with_spec(obj: Obj, spec: dict[str, Any] | None) -> Obj:
    """``obj`` with ``spec`` in place of its own, a generation on when it differs (None: as it is)."""
    if spec is None or spec == obj.get("spec"):
        return obj
    meta = obj["metadata"]
    return {**obj, "spec": spec, "metadata": {**meta, "generation": int(meta.get("generation", 1)) + 1}}


def _finalized(kind: Kind, obj: Obj) -> bool:
    """No finalizer holds ``obj`` once deleted: for a Namespace, ``spec.finalizers`` count too."""
    return finalized(obj) if kind is NAMESPACE else not obj["metadata"].get("finalizers")


def _held(kind: Kind, obj: Obj) -> bool:
    """A delete of ``obj`` only marks it. A Namespace is always held on its first delete: every one
    carries the ``kubernetes`` finalizer until it is emptied (one stored before that rule gets it then)."""
    if kind is NAMESPACE and not obj["metadata"].get("deletionTimestamp"):
        return True
    return not _finalized(kind, obj)


def _marked(kind: Kind, obj: Obj) -> Obj:
    """``obj`` as a delete that finalizers hold leaves it."""
    if kind is NAMESPACE:
        return marked(obj, now_rfc3339())
    out = copy.deepcopy(obj)
    out["metadata"]["deletionTimestamp"] = now_rfc3339()
    out["metadata"]["deletionGracePeriodSeconds"] = 0
    return out


def _content(obj: Obj) -> Any:
    """What counts for ``generation``: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _encode(obj: Obj) -> bytes:
    body = dict(obj)
    body["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return jsondoc.dumps(body)
