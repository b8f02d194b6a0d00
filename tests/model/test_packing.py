"""Documents a cache keeps packed: exact round trips, one dictionary for the packer's life, and a
Binding record that holds a fraction of its stored bytes."""

from __future__ import annotations

import threading

import pytest

from drods.model import jsondoc
from drods.model.packing import Packer
from drods.schedulerd.records import decode_binding


def _binding(i: int) -> bytes:
    return jsondoc.dumps({
        "apiVersion": "multicluster.io/v1alpha1", "kind": "ResourceBinding",
        "metadata": {"name": f"deployment-default-app-{i:06d}", "uid": f"uid-{i:08d}", "generation": 1,
                     "labels": {"multicluster.io/managed-by": "resource-detector"}},
        "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"app-{i:06d}",
                              "namespace": "default"}, "replicas": 2, "resources": {"cpu": 0.01}},
        "status": {"phase": "Running", "placement": [{"cluster": f"member-{i % 9}", "replicas": 2}],
                   "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                   "message": "2/2 replicas ready", "lastTransitionTime": "2026-12-03T20:54:09Z"}],
                   "reasons": {"member-1": "insufficient cpu"}}})


def test_packed_documents_unpack_to_their_bytes_and_weigh_a_fraction_of_them() -> None:
    packer = Packer()
    raws = [_binding(i) for i in range(200)] + [b"", b"{}", bytes(range(256)) * 4]
    packed = [packer.pack(r) for r in raws]
    assert [packer.unpack(p) for p in packed] == raws
    assert sum(map(len, packed[1:200])) < 0.3 * sum(map(len, raws[1:200]))


def test_a_packer_keeps_the_dictionary_it_chose_first_from_a_long_document() -> None:
    packer = Packer()
    with pytest.raises(ValueError):
        packer.unpack(b"\x01x")
    short = packer.pack(b"{}")
    assert packer.unpack(short) == b"{}" and len(short) == 3  # kept as it is, no dictionary chosen
    first = packer.pack(_binding(1))
    packer.pack(b'{"something": "else entirely"}' * 100)
    assert packer.unpack(first) == _binding(1)
    assert packer.pack(_binding(1)) == first  # the same document packs the same way
    assert packer.unpack(short) == b"{}" and packer.pack(b"{}") == short


def test_threads_packing_the_first_documents_at_once_agree_on_one_dictionary() -> None:
    packer = Packer()
    out: dict[int, bytes] = {}
    start = threading.Barrier(8)

    def pack(i: int) -> None:
        start.wait()
        out[i] = packer.pack(_binding(i))

    threads = [threading.Thread(target=pack, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {i: packer.unpack(p) for i, p in out.items()} == {i: _binding(i) for i in range(8)}


def test_a_binding_record_reads_back_its_stored_bytes_but_the_reasons() -> None:
    raw = _binding(7)
    rec = decode_binding("/registry/multicluster.io/bindings/b", raw, 5)
    assert rec is not None
    assert b"reasons" not in rec.raw and rec.object()["status"]["placement"] == [{"cluster": "member-7", "replicas": 2}]
    assert len(rec.packed) < len(rec.raw)  # how much less depends on the first Binding the process packed
