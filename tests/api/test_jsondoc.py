"""Stored documents' encoding: exact round trips, and bytes that weigh what they hold."""

from __future__ import annotations

import tracemalloc

from drods.model import jsondoc


def _binding(i: int) -> dict[str, object]:
    return {"metadata": {"name": f"app-{i:06d}", "generation": 2},
            "spec": {"replicas": 3, "resources": {"cpu": 0.5, "memory": 1.0}},
            "status": {"phase": "Unschedulable", "message": "0/2000 clusters available: 2000 cluster not ready.",
                       "reasons": {f"cluster-{k:05d}": "cluster not ready" for k in range(5)}}}


def test_documents_round_trip_and_big_integers_fall_back() -> None:
    doc = _binding(1)
    assert jsondoc.loads(jsondoc.dumps(doc)) == doc
    assert jsondoc.loads(jsondoc.dumps({"n": 2**70})) == {"n": 2**70}
    assert jsondoc.canonical({"b": 1, "a": [1, 2]}) == b'{"a":[1,2],"b":1}'


def test_a_kept_document_weighs_about_its_length() -> None:
    """Informers and the scheduler keep encoded documents: 100,000 of them must not hold 4 KiB each."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [jsondoc.dumps(_binding(i)) for i in range(2000)]
        per_doc = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    size = len(kept[0])
    assert 200 < size < 600
    assert per_doc < size + 200, (per_doc, size)


def test_kept_documents_share_their_repeated_values_and_read_the_same() -> None:
    raws = [jsondoc.dumps({**_binding(i), "list": ["x", {"deep": "value"}, 1, None]}) for i in range(2000)]
    a, b = jsondoc.loads_kept(raws[0]), jsondoc.loads_kept(raws[1])
    assert a == jsondoc.loads(raws[0]) and b == jsondoc.loads(raws[1])
    assert a["status"]["message"] is b["status"]["message"]
    assert a["status"]["reasons"]["cluster-00003"] is b["status"]["reasons"]["cluster-00003"]
    assert a["list"][1]["deep"] is b["list"][1]["deep"] and a["list"][0] is b["list"][0]

    def held(decode: object) -> float:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = [decode(r) for r in raws]  # type: ignore[operator]
            return (tracemalloc.get_traced_memory()[0] - before) / len(kept)
        finally:
            tracemalloc.stop()

    assert held(jsondoc.loads_kept) < held(jsondoc.loads) - 300  # five reasons, a phase, a message


def test_the_pool_of_kept_values_is_bounded() -> None:
    for i in range(3):
        jsondoc.loads_kept(jsondoc.dumps({"uids": [f"{i}-{k}" for k in range((1 << 16) + 10)]}))
        assert len(jsondoc.shared_strings) <= (1 << 17) + 20
    jsondoc.loads_kept(b'{"a": "b"}')
    assert len(jsondoc.shared_strings) <= 1
