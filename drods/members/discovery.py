"""Where one member serves a kind: its discovery, read one group-version at a time and kept small.

The Kubernetes client's `DynamicClient` kept every resource of every group a member serves, decoded
(84.3 KB held per member client against 42.5 KB now, `docs/performance.md`), and wrote it to a file in
the temporary directory. DRO-DS asks a member for a handful of kinds, so this keeps only the group-versions
it was asked about, as `ServedResource` records. A kind a group-version lacks is looked up again at
once (a CRD installed since the last read), as client-go's deferred discovery does on a miss.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


def group_version_path(api_version: str) -> str:
    """``/api/v1`` for the core group, ``/apis/GROUP/VERSION`` for the others."""
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


@dataclass(frozen=True)
class ServedResource:
    """A kind as one member serves it: its plural and scope come from the member's discovery."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def path(self) -> str:
        """The collection across every namespace."""
        return f"{group_version_path(self.api_version)}/{self.plural}"

    def collection(self, namespace: str | None) -> str:
        """The collection of one namespace (every namespace when None, or when the kind has none)."""
        if not self.namespaced or namespace is None:
            return self.path
        return f"{group_version_path(self.api_version)}/namespaces/{namespace}/{self.plural}"

    def item(self, name: str, namespace: str | None) -> str:
        return f"{self.collection(namespace if self.namespaced else None)}/{name}"


PODS = ServedResource("v1", "Pod", "pods", namespaced=True)


class KindNotServed(LookupError):
    """The member does not serve this apiVersion, or not this kind in it."""


class MemberDiscovery:
    """The kinds of the group-versions asked about, read with ``read(path)`` (the document, or None
    when the member answers 404). Safe to call from the member's worker threads."""

    def __init__(self, read: Callable[[str], Mapping[str, Any] | None]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._kinds: dict[str, dict[str, ServedResource]] = {}  # apiVersion → kind → resource

    def resource(self, api_version: str, kind: str) -> ServedResource:
        with self._lock:
            known = self._kinds.get(api_version, {}).get(kind)
        if known is not None:
            return known
        kinds = self._fetch(api_version)
        found = kinds.get(kind)
        if found is None:
            raise KindNotServed(f"{kind} is not served in {api_version}")
        return found

    def forget(self, api_version: str) -> None:
        """Read ``api_version`` again at its next use: a call to one of its kinds answered 404 (a CRD
        removed since, or its version no longer served)."""
        with self._lock:
            self._kinds.pop(api_version, None)

    def _fetch(self, api_version: str) -> dict[str, ServedResource]:
        doc = self._read(group_version_path(api_version))
        if doc is None:
            raise KindNotServed(f"{api_version} is not served")
        kinds: dict[str, ServedResource] = {}
        for r in doc.get("resources") or []:
            name, kind = str(r.get("name") or ""), str(r.get("kind") or "")
            if name and kind and "/" not in name:  # subresources (deployments/status) share the kind
                kinds[kind] = ServedResource(api_version, kind, name, bool(r.get("namespaced")))
        with self._lock:
            self._kinds[api_version] = kinds
        return kinds
