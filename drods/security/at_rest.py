"""Which kinds are sealed at rest (SEC2): the configuration file's ``encryption`` section.

Like Kubernetes' ``EncryptionConfiguration``, kinds are named as resources — ``PLURAL.GROUP``
(``deployments.apps``, ``bindings.multicluster.io``), a core kind by its plural alone (``secrets``),
``*.GROUP`` for every kind of a group (``*.`` the core group) and ``*.*`` for every kind. A name of a
group DRO-DS does not serve names a custom kind (F7), which may be defined later. Each name becomes
a store key prefix that `drods.store.encrypted.EncryptingStore` seals.

The default seals what carries credentials or task configuration: Secrets, Works, Clusters, the
Bindings and every propagated built-in template kind; a custom kind's resources when the list names
them (its ``PLURAL.GROUP``, ``*.GROUP`` or ``*.*``). Cluster credentials are sealed field by field as well,
whatever the list says (`drods.registry.secrets`): they are never stored in plaintext. The audit log
records what each write changed (SEC3) — the values of any kind — so it is sealed whenever any kind
is. Domain configuration (``PUT /api/v1/sync/configs``, `ALWAYS_SEALED`) is sealed whatever the list
says: it is an opaque document its writers keep settings — passwords among them — in.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from drods.model.keys import AUDIT_PREFIX, SYNC_CONFIGS_PREFIX
from drods.model.kinds import (
    ALL_KINDS,
    BINDING,
    CLUSTER,
    CUSTOM_RESOURCES_PREFIX,
    SECRET,
    TEMPLATE_KINDS,
    WORK,
    Kind,
    custom_resources_prefix,
)
from drods.store.encrypted import outermost


def resource_name(kind: Kind) -> str:
    """How the ``encryption`` section names ``kind`` (Kubernetes' ``resource.group``)."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


_BY_NAME: dict[str, Kind] = {resource_name(k): k for k in ALL_KINDS}
_GROUPS = frozenset(k.group for k in ALL_KINDS)

DEFAULT_RESOURCES: tuple[str, ...] = tuple(dict.fromkeys(
    resource_name(k) for k in (SECRET, WORK, CLUSTER, BINDING, *TEMPLATE_KINDS)))


# sealed whatever ``encryption.resources`` lists
ALWAYS_SEALED: tuple[str, ...] = (SYNC_CONFIGS_PREFIX,)


def prefixes_of(name: str) -> tuple[str, ...]:
    """The store key prefixes a resource name covers; ValueError for a name of no kind."""
    plural, dot, group = name.partition(".")
    if plural == "*":
        if not dot:
            raise ValueError(f"{name!r}: write '*.*' (every kind), '*.GROUP', or '*.' (the core group)")
        if group == "*":
            return tuple(k.key_prefix() for k in ALL_KINDS) + (CUSTOM_RESOURCES_PREFIX,)
        ours = tuple(k.key_prefix() for k in ALL_KINDS if k.group == group)
        return ours if group in _GROUPS else ours + (f"{CUSTOM_RESOURCES_PREFIX}{group}/",)
    if not plural or "*" in name or (dot and not group):
        raise ValueError(f"{name!r} is not a resource name (PLURAL, PLURAL.GROUP, *.GROUP or *.*)")
    kind = _BY_NAME.get(name)
    if kind is not None:
        return (kind.key_prefix(),)
    if group in _GROUPS:
        raise ValueError(f"{name!r}: no such kind (the {group or 'core'} group serves "
                         f"{', '.join(sorted(n for n, k in _BY_NAME.items() if k.group == group))})")
    return (custom_resources_prefix(group, plural),)


def sealable_prefixes() -> tuple[str, ...]:
    """Every prefix a sealed value may be under, the audit log's included (what rotation scans to
    unseal what the list no longer names)."""
    return tuple(k.key_prefix() for k in ALL_KINDS) + (CUSTOM_RESOURCES_PREFIX, AUDIT_PREFIX, *ALWAYS_SEALED)


class EncryptionConfig(BaseModel):
    """The ``encryption`` section: the kinds whose objects are sealed whole in the store."""

    model_config = ConfigDict(extra="forbid")

    resources: list[str] = Field(default_factory=lambda: list(DEFAULT_RESOURCES))

    @field_validator("resources")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        errors = []
        for name in names:
            try:
                prefixes_of(name)
            except ValueError as e:
                errors.append(str(e))
        if errors:
            raise ValueError("; ".join(errors))
        return list(dict.fromkeys(names))

    def prefixes(self) -> tuple[str, ...]:
        """The sealed key prefixes, none inside another: `ALWAYS_SEALED`, and the audit log's with any kind's."""
        sealed = [p for name in self.resources for p in prefixes_of(name)]
        return tuple(outermost([*sealed, AUDIT_PREFIX, *ALWAYS_SEALED] if sealed else [*ALWAYS_SEALED]))
