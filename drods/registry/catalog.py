"""The kinds a server serves right now: its fixed table plus the kinds its stored
CustomResourceDefinitions define.

Every process keeps one catalog current from a watch on the definitions (`learn` is the informer's
change handler), so every API server replica serves a custom kind once its definition is stored,
whoever wrote it, and stops when it is deleted; the replica that takes the write also learns it at
once (`learn_object`), so a client may create resources right after the definition. Routes,
discovery and OpenAPI read `kinds()`; controllers resolve a custom resource's key or
apiVersion/kind here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from drods.errors import validation_failed
from drods.model.crd import CustomResourceDefinitionSpec
from drods.model.kinds import ALL_KINDS, CUSTOM_RESOURCE_DEFINITION, CUSTOM_RESOURCES_PREFIX, Kind
from drods.model.structural import StructuralSchema
from drods.model.timefmt import now_rfc3339

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def established(crd: Obj) -> Obj | None:
    """The status Kubernetes gives a served definition (``kubectl wait --for condition=established``
    waits for it): names accepted, established, the storage version recorded; None if unreadable."""
    try:
        spec = CustomResourceDefinitionSpec.model_validate(crd.get("spec") or {})
    except ValidationError:
        return None
    previous = crd.get("status") or {}
    since = {c.get("type"): c.get("lastTransitionTime") for c in previous.get("conditions") or []
             if isinstance(c, dict) and c.get("status") == "True"}
    now = now_rfc3339()
    conditions = [{"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": since.get(t) or now}
                  for t, r, m in (("NamesAccepted", "NoConflicts", "no conflicts found"),
                                  ("Established", "InitialNamesAccepted", "the initial names have been accepted"))]
    stored = list(previous.get("storedVersions") or [])
    storage = next(v.name for v in spec.versions if v.storage)
    return {"conditions": conditions, "acceptedNames": spec.names.model_dump(exclude_none=True),
            "storedVersions": stored if storage in stored else [*stored, storage]}


def printer_columns(columns: list[dict[str, Any]]) -> tuple[tuple[str, str, str, int], ...]:
    """``additionalPrinterColumns`` whose ``jsonPath`` is a plain field path (``.spec.size``); others
    (filters, indexes) are left out of ``kubectl get``."""
    out = []
    for c in columns:
        path = str(c.get("jsonPath") or "")
        if c.get("name") and re.fullmatch(r"(\.[A-Za-z0-9_-]+)+", path):
            out.append((str(c["name"]), path[1:], str(c.get("type") or "string"), int(c.get("priority") or 0)))
    return tuple(out)


def custom_kinds(crd: Obj) -> tuple[Kind, ...]:
    """One Kind per served version of a stored definition (none if it is unreadable or deleted)."""
    meta = crd.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return ()
    try:
        spec = CustomResourceDefinitionSpec.model_validate(crd.get("spec") or {})
    except ValidationError:
        log.warning("ignoring unreadable CustomResourceDefinition %s", meta.get("name"))
        return ()
    n = spec.names
    out = []
    for v in spec.versions:
        if not v.served:
            continue
        status = bool(v.subresources and v.subresources.status is not None)
        sc = v.subresources.scale if v.subresources else None
        scale = (sc.specReplicasPath, sc.statusReplicasPath, sc.labelSelectorPath or "") if sc else None
        out.append(Kind(spec.group, v.name, n.kind, n.plural, spec.scope == "Namespaced",
                        short_names=tuple(n.shortNames), categories=tuple(n.categories),
                        custom=StructuralSchema(v.schema_.openAPIV3Schema, status,
                                                printer_columns(v.additionalPrinterColumns), scale)))
    return tuple(out)


class KindCatalog:
    def __init__(self, fixed: Iterable[Kind]) -> None:
        self.fixed = tuple(fixed)
        self._serves_crds = CUSTOM_RESOURCE_DEFINITION in self.fixed
        self._by_crd: dict[str, tuple[Kind, ...]] = {}  # definition name → its kinds
        self._crds: dict[str, Obj] = {}  # definition name → the stored object
        self._kinds = self.fixed
        self._index()
        self.epoch = 0  # bumped on every change

    # ---------------------------------------------------------------- reading
    def kinds(self) -> tuple[Kind, ...]:
        return self._kinds

    def resolve(self, group: str, version: str, plural: str) -> Kind | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> Kind | None:
        return self._by_name.get((api_version, kind))

    def _index(self) -> None:
        """Lookups by path and by apiVersion/kind (the first of a name wins, as in the table's order)."""
        self._by_path: dict[tuple[str, str, str], Kind] = {}
        self._by_name: dict[tuple[str, str], Kind] = {}
        for k in self._kinds:
            self._by_path.setdefault((k.group, k.version, k.plural), k)
            self._by_name.setdefault((k.api_version, k.kind), k)

    def custom_of_key(self, key: str) -> Kind | None:
        """The custom kind a custom resource's store key belongs to (its storage version's)."""
        if not key.startswith(CUSTOM_RESOURCES_PREFIX):
            return None
        for kinds in self._by_crd.values():
            if kinds and key.startswith(kinds[0].key_prefix()):
                return kinds[0]
        return None

    def definition(self, kind: Kind) -> Obj | None:
        """The stored definition of a custom kind (it travels to members with the kind's resources)."""
        name = f"{kind.plural}.{kind.group}"
        return self._crds.get(name) if kind.custom is not None else None

    # ---------------------------------------------------------------- learning
    def learn(self, key: str, old: Any, new: Any) -> None:
        """Informer handler for the definitions' prefix (objects decoded as mappings)."""
        name = key.rsplit("/", 1)[-1]
        if isinstance(new, dict):
            self.learn_object(new)
        else:
            self.forget(name)

    def learn_object(self, crd: Obj) -> None:
        name = str((crd.get("metadata") or {}).get("name") or "")
        known = self._crds.get(name)
        if known is not None and known.get("spec") == crd.get("spec") and \
                not (crd.get("metadata") or {}).get("deletionTimestamp"):
            self._crds[name] = crd  # a status or metadata change: the kinds stay as they are
            return
        kinds = custom_kinds(crd)
        if not kinds:
            self.forget(name)
            return
        self._crds[name] = crd
        self._by_crd[name] = kinds
        self._rebuild()

    def forget(self, name: str) -> None:
        if self._by_crd.pop(name, None) is not None:
            self._crds.pop(name, None)
            self._rebuild()

    def _rebuild(self) -> None:
        if not self._serves_crds:
            self._kinds = self.fixed
            return
        taken = {(k.group, k.version, k.plural) for k in self.fixed}
        extra = [k for _, kinds in sorted(self._by_crd.items()) for k in kinds
                 if (k.group, k.version, k.plural) not in taken]
        self._kinds = self.fixed + tuple(extra)
        self._index()
        self.epoch += 1


async def check_definition(registry: Any, kind: Kind, obj: Obj) -> None:
    """Admission of a definition: named ``<plural>.<group>``, not redefining a kind the server has
    built in (the schema itself was checked with the spec)."""
    if kind is not CUSTOM_RESOURCE_DEFINITION:
        return
    spec = CustomResourceDefinitionSpec.model_validate(obj.get("spec") or {})
    name = obj["metadata"]["name"]
    if name != spec.expected_name():
        raise validation_failed(f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid',
                                [{"field": "metadata.name", "message": f"must be spec.names.plural+\".\"+spec.group "
                                  f"({spec.expected_name()})"}], kind=kind.kind, group=kind.group, name=name)
    for v in spec.versions:
        if any(k.group == spec.group and k.version == v.name and k.plural == spec.names.plural for k in ALL_KINDS):
            raise validation_failed(f"{spec.names.plural}.{spec.group}/{v.name} is built in",
                                    [{"field": "spec.group", "message": "a built-in kind cannot be redefined"}],
                                    kind=kind.kind, group=kind.group, name=name)
