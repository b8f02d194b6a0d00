"""The scheduler's cache of validated specs: reused only while what made the spec holds."""

from __future__ import annotations

from typing import Any

from drods.model.annotations import PLACEMENT_OFFERS
from drods.schedulerd.spec_cache import SpecCache


def binding(uid: str, replicas: int, generation: int = 1, offers: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "uid": uid, "generation": generation}
    if offers is not None:
        meta["annotations"] = {PLACEMENT_OFFERS: offers}
    return {"metadata": meta, "spec": {"replicas": replicas, "placement": {"clusterAffinity": {
        "clusterNames": ["a"]}}}}


def test_a_binding_created_again_under_its_name_is_not_given_the_old_spec() -> None:
    cache = SpecCache()
    assert cache.spec("web", 1, binding("u1", 5)).replicas == 5
    assert cache.spec("web", 1, binding("u1", 5)) is cache.spec("web", 1, binding("u1", 5))  # reused
    # deleted and created again with 4 replicas: generation 1 again, another uid
    assert cache.spec("web", 1, binding("u2", 4)).replicas == 4


def test_new_placement_offers_make_a_new_spec_at_the_same_generation() -> None:
    cache = SpecCache()
    before = cache.spec("web", 3, binding("u1", 2, 3))
    after = cache.spec("web", 3, binding("u1", 2, 3, offers="b"))
    assert after is not before
    assert after.placement.clusterAffinity is not None and "b" in after.placement.clusterAffinity.clusterNames


def test_the_cache_is_bounded_and_forgets() -> None:
    cache = SpecCache(size=2)
    for i in range(3):
        cache.spec(f"w{i}", 1, binding(f"u{i}", 1))
    assert len(cache) == 2
    cache.forget("w2")
    assert len(cache) == 1
