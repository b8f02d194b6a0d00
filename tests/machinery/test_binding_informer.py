"""The process's one informer of Bindings keeps them without the scheduler's per-cluster reasons."""

from __future__ import annotations

from pathlib import Path

from drods.assembly import assemble
from drods.model import jsondoc
from drods.model.kinds import BINDING
from drods.registry.objects import decode_binding_kept, decode_stored
from drods.store import KeyValue, open_store


def test_a_kept_binding_is_the_stored_one_without_its_reasons() -> None:
    doc = {"metadata": {"name": "web"}, "spec": {"replicas": 2},
           "status": {"phase": "Unschedulable", "message": "0/2 clusters available: 2 cluster not ready.",
                      "reasons": {"a": "cluster not ready", "b": "cluster not ready"},
                      "reasonCounts": {"cluster not ready": 3}, "reasonsOmitted": 1, "placement": []}}
    kv = KeyValue(BINDING.key("web"), jsondoc.dumps(doc), 3, 7, 1, 0)
    kept, stored = decode_binding_kept(kv), decode_stored(kv)
    assert stored is not None and stored["status"]["reasons"] == {"a": "cluster not ready", "b": "cluster not ready"}
    assert kept is not None and not {"reasons", "reasonCounts", "reasonsOmitted"} & set(kept["status"])
    for f in ("reasons", "reasonCounts", "reasonsOmitted"):
        del stored["status"][f]
    assert kept == stored  # resourceVersion and everything else as decode_stored gives it
    assert decode_binding_kept(KeyValue(BINDING.key("x"), b"[]", 3, 7, 1, 0)) is None


async def test_every_component_of_serve_shares_one_binding_informer(tmp_path: Path) -> None:
    store = open_store(f"sqlite://{tmp_path / 'drods.db'}")
    try:
        plane = assemble(store, tmp_path)
        decoders = plane.manager.informers.decoders(BINDING.key_prefix())
        # the controllers' one cache of kept documents, beside the scheduler's compact records
        assert plane.scheduler is not None
        assert decoders == [plane.scheduler._decode_binding, decode_binding_kept]
    finally:
        await store.close()


def test_kept_bindings_share_values_and_other_objects_feed_no_pool() -> None:
    def kv(name: str, doc: dict[str, object]) -> KeyValue:
        return KeyValue(BINDING.key(name), jsondoc.dumps(doc), 3, 7, 1, 0)

    a = decode_binding_kept(kv("a", {"metadata": {"name": "a"}, "status": {"phase": "Unschedulable"}}))
    b = decode_binding_kept(kv("b", {"metadata": {"name": "b"}, "status": {"phase": "Unschedulable"}}))
    assert a is not None and b is not None and a["status"]["phase"] is b["status"]["phase"]
    token = "c2VjcmV0LXZhbHVl"
    secret = decode_stored(kv("s", {"kind": "Secret", "metadata": {"name": "s"}, "data": {"token": token}}))
    assert secret is not None and secret["data"]["token"] == token
    assert token not in jsondoc.shared_strings  # a Secret's value is not kept past its document
