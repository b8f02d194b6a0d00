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


def _placed(i: int) -> dict[str, object]:
    """A Binding as the scheduler and the status controller leave it: most of its parts repeat."""
    cluster = f"cluster-{i % 7}"
    usage = {"pods": 1, "readyPods": 1, "cpu": {"used": "5m", "requested": "10m"}}
    return {"metadata": {"name": f"app-{i:06d}", "uid": f"uid-{i}",
                         "labels": {"multicluster.io/managed-by": "resource-detector"}},
            "spec": {"resource": {"kind": "Deployment", "name": f"app-{i:06d}"}, "replicas": 1,
                     "placement": {"replicaScheduling": {"replicaSchedulingType": "Divided"}}},
            "status": {"phase": "Running", "placement": [{"cluster": cluster, "replicas": 1}],
                       "clusters": [{"cluster": cluster, "applied": True, "usage": usage,
                                     "conditions": [{"type": "Available", "status": "True"}]}],
                       "conditions": [{"type": "Ready", "status": "True"}], "usage": usage}}


def test_shared_documents_share_their_repeated_parts_and_read_the_same() -> None:
    raws = [jsondoc.dumps(_placed(i)) for i in range(2000)]
    a, b, c = (jsondoc.loads_shared(raws[i]) for i in (0, 7, 1))
    for i, doc in ((0, a), (7, b), (1, c)):
        assert doc == jsondoc.loads(raws[i])
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["spec"]["placement"] is b["spec"]["placement"]
    assert a["status"]["placement"] is b["status"]["placement"]  # the same cluster
    assert a["status"]["placement"] is not c["status"]["placement"]  # another
    assert a["status"]["clusters"][0]["usage"] is c["status"]["usage"]
    assert a["status"]["clusters"] is b["status"]["clusters"]  # a list of equal parts is itself shared
    # the document's own members stay its own: a cache sets resourceVersion, replaces the status
    assert a["metadata"] is not b["metadata"] and a["status"] is not b["status"]
    assert a["spec"]["resource"] is not b["spec"]["resource"]  # content differs: never shared

    def held(decode: object) -> float:
        """What the documents hold (the pool, a bounded constant, let go)."""
        jsondoc.shared_containers.clear()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = [decode(r) for r in raws]  # type: ignore[operator]
            jsondoc.shared_containers.clear()
            return (tracemalloc.get_traced_memory()[0] - before) / len(kept)
        finally:
            tracemalloc.stop()

    shared, kept = held(jsondoc.loads_shared), held(jsondoc.loads_kept)
    assert shared < 0.7 * kept, (shared, kept)


def test_shared_parts_are_equal_in_type_not_only_in_value() -> None:
    docs = [jsondoc.loads_shared(jsondoc.dumps({"metadata": {"name": str(i)}, "spec": {"v": {"n": value}}}))
            for i, value in enumerate((1, 1.0, True, "1", None, [1], 1))]
    values = [d["spec"]["v"]["n"] for d in docs]
    assert [type(v) for v in values] == [int, float, bool, str, type(None), list, int]
    assert docs[0]["spec"]["v"] is docs[6]["spec"]["v"]
    assert len({id(d["spec"]["v"]) for d in docs}) == 6


def test_the_pool_of_shared_parts_is_bounded() -> None:
    for i in range(3):
        jsondoc.loads_shared(jsondoc.dumps({"spec": [{"uid": f"{i}-{k}"} for k in range((1 << 14) + 10)]}))
        assert len(jsondoc.shared_containers) <= (1 << 15) + 20
    jsondoc.loads_shared(b'{"spec": {"a": "b"}}')
    assert len(jsondoc.shared_containers) <= 1
