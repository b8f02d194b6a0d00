"""Karmada's ``search.karmada.io/v1alpha1`` ResourceRegistry: which resources of which member
clusters the search cache keeps (`drods.controllers.search`), served read-only at
``/apis/search.karmada.io/v1alpha1/search/cache/...`` (`drods.api.routes.search`).

As in Karmada: ``targetCluster`` is a ClusterAffinity (names, exclusions, label and field selectors;
empty: every cluster), ``resourceSelectors`` name an ``apiVersion`` and ``kind`` and optionally a
``namespace`` (empty: every namespace). ``backendStore`` (OpenSearch) is accepted and stored; DRO-DS
keeps every registry in its built-in in-memory cache only.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from drods.model.placement import ClusterAffinity

SEARCH_GROUP = "search.karmada.io"
SEARCH_VERSION = "v1alpha1"
# What karmada-search puts on every object it serves from its cache: the member it came from.
CACHED_FROM_CLUSTER = "resource.karmada.io/cached-from-cluster"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SearchResourceSelector(_Strict):
    """A kind to cache (``apiVersion`` and ``kind``), in one ``namespace`` or (empty) in all."""

    apiVersion: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    namespace: str = ""


class LocalSecretReference(_Strict):
    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)


class OpenSearchConfig(_Strict):
    addresses: list[str] = Field(default_factory=list)
    secretRef: LocalSecretReference | None = None


class BackendStoreConfig(_Strict):
    """Stored as written; the built-in cache is used whatever it says (docs/karmada.md)."""

    openSearch: OpenSearchConfig | None = None


class ResourceRegistrySpec(_Strict):
    targetCluster: ClusterAffinity = Field(default_factory=ClusterAffinity)
    resourceSelectors: list[SearchResourceSelector] = Field(min_length=1)
    backendStore: BackendStoreConfig | None = None
