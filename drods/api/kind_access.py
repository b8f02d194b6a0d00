"""What a caller may do to one kind of object: the check every Kubernetes path makes once the route's
rule (`drods.api.access`) has let the request in, and what ``kubectl auth can-i`` is answered from
(`drods.api.routes.access_review`), so the answer and the enforcement cannot drift apart."""

from __future__ import annotations

from drods.api.auth import Action, Principal
from drods.errors import Forbidden
from drods.model.kinds import Kind


def require_on_kind(principal: Principal, kind: Kind, write: bool, namespace: str | None) -> None:
    """403 unless ``principal`` may read (or write) objects of ``kind`` in ``namespace`` (None: across
    every namespace): the role's action, a namespaced token's namespaces (a cluster-scoped kind is never
    theirs), and kinds only cluster-wide tokens write."""
    principal.require(Action.WRITE if write else Action.READ, namespace=namespace if kind.namespaced else None)
    if write and not kind.tenant_writable and principal.namespaces is not None:
        what = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
        raise Forbidden(f"{what} are written by cluster-wide tokens only: a namespaced token "
                        "may read its namespace's", {"kind": kind.kind, "namespaces": sorted(principal.namespaces)})
