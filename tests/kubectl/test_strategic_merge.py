"""Strategic merge patch as kubectl sends it for built-in kinds (merge keys and directives)."""

from __future__ import annotations

from typing import Any

from drods.api.strategic_merge import strategic_merge

POD: dict[str, Any] = {
    "containers": [
        {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
         "ports": [{"containerPort": 80}, {"containerPort": 443}]},
        {"name": "side", "image": "side:1"},
    ],
    "volumes": [{"name": "data", "emptyDir": {}}],
}


def test_lists_merge_by_key_and_keep_the_rest() -> None:
    patch = {"containers": [{"name": "app", "image": "app:2", "env": [{"name": "B", "value": "3"}]}]}
    out = strategic_merge(POD, patch)
    app, side = out["containers"]
    assert app["image"] == "app:2" and side == {"name": "side", "image": "side:1"}
    assert app["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert app["ports"] == POD["containers"][0]["ports"]
    assert POD["containers"][0]["image"] == "app:1"  # inputs untouched


def test_directives() -> None:
    out = strategic_merge(POD, {
        "$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
        "containers": [{"name": "side", "$patch": "delete"}, {"name": "new", "image": "n:1"}],
        "volumes": [{"name": "data"}, {"$patch": "replace"}],
    })
    assert [c["name"] for c in out["containers"]] == ["app", "new"]
    assert out["volumes"] == [{"name": "data"}]
    assert not any(k.startswith("$") for k in out)


def test_order_null_retain_keys_and_scalar_lists() -> None:
    base = {"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}
    out = strategic_merge(base, {
        "metadata": {"labels": {"x": None}, "finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]},
        "strategy": {"$retainKeys": ["type"], "type": "Recreate"},
    })
    assert out["metadata"] == {"finalizers": ["b", "c"], "labels": {"y": "2"}}
    assert out["strategy"] == {"type": "Recreate"}
    assert strategic_merge(base, {"strategy": {"$patch": "delete"}}).get("strategy") is None
    ordered = strategic_merge({"containers": [{"name": "a"}, {"name": "b"}]},
                              {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]})
    assert [c["name"] for c in ordered["containers"]] == ["b", "a"]
