"""A sim node gives each of its live pods an address of its own, as a node's IPAM does: two pods whose
uids hash alike (which once left a Service's EndpointSlice with two endpoints at one address) get two."""

from __future__ import annotations

import zlib

from drods.sim.controller import pod_address, pod_ips


def test_pods_whose_uids_hash_alike_get_distinct_addresses_and_keep_them() -> None:
    first = "uid-0"
    twin = next(f"uid-{i}" for i in range(1, 100_000)
                if zlib.crc32(f"uid-{i}".encode()) % 250 == zlib.crc32(first.encode()) % 250)
    taken: set[str] = set()
    a, b = pod_address(3, first, taken), pod_address(3, twin, taken)
    assert a != b and a.startswith("10.244.3.") and b.startswith("10.244.3.")
    assert taken == {a, b}

    pods = [{"spec": {"nodeName": "n3"}, "status": {"phase": "Running", "podIP": a}},
            {"spec": {"nodeName": "n3"}, "status": {"phase": "Succeeded", "podIP": b}},  # ended: its address is free
            {"spec": {"nodeName": "n4"}, "status": {"phase": "Running", "podIP": b}}]
    assert pod_ips(pods) == {"n3": {a}, "n4": {b}}
    assert pod_address(3, twin, pod_ips(pods)["n3"]) == b  # its own hash's address, free again


def test_a_full_node_range_shares_rather_than_fails() -> None:
    taken = {f"10.244.0.{i}" for i in range(2, 252)}
    assert pod_address(0, "uid-0", taken) == f"10.244.0.{zlib.crc32(b'uid-0') % 250 + 2}"
