"""Kubernetes quantities → cores / GiB / counts, and back to canonical strings."""

from __future__ import annotations

import pytest

from drods.model.quantity import GIB, cores, count, format_cpu, format_memory, format_nanocores, gib, quantity


@pytest.mark.parametrize(("text", "expected"), [
    ("100m", 0.1), ("2", 2.0), ("1.5", 1.5), ("2500m", 2.5), ("250000000n", 0.25), ("500000u", 0.5),
    ("1e3", 1000.0), ("1E3", 1000.0), ("12e-3", 0.012), ("2k", 2000.0), (None, 0.0), ("", 0.0), (3, 3.0),
])
def test_cores(text: object, expected: float) -> None:
    assert cores(text) == pytest.approx(expected)


@pytest.mark.parametrize(("text", "expected_bytes"), [
    ("1Ki", 1024), ("256Mi", 256 * 1024**2), ("1.5Gi", 1.5 * GIB), ("1Ti", 1024 * GIB), ("1G", 10**9),
    ("64M", 64 * 10**6), ("1k", 1000), ("1e9", 10**9), ("129e6", 129 * 10**6), ("123", 123),
    ("16393216Ki", 16393216 * 1024),
])
def test_gib(text: str, expected_bytes: float) -> None:
    assert gib(text) == pytest.approx(expected_bytes / GIB)


def test_counts_and_exactness() -> None:
    assert count("110") == 110 and count("8") == 8
    assert quantity("100m") * 3 == quantity("300m")  # exact decimals, no float drift


@pytest.mark.parametrize("bad", ["abc", "1ki", "1mi", "--1", "1.2.3"])
def test_bad_quantities_raise(bad: str) -> None:
    with pytest.raises(ValueError):
        quantity(bad)


def test_formatting() -> None:
    assert format_cpu(0.25) == "250m" and format_cpu(4) == "4" and format_cpu(5.6) == "5600m"
    assert format_memory(GIB) == "1Gi" and format_memory(256 * 1024**2) == "256Mi"
    assert format_memory(1536 * 1024) == "1536Ki"
    assert format_nanocores(0.75) == "750000000n"
    for value in (0.25, 4.0, 5.6):
        assert cores(format_cpu(value)) == pytest.approx(value)
