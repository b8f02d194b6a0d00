"""Shared by the sim and members tests: start sims once per module, wait on conditions."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config

from drods.sim.harness import SimProcess

T = TypeVar("T")


def wait_until(fn: Callable[[], T | None], timeout: float = 15.0, interval: float = 0.05, what: str = "") -> T:
    """Poll ``fn`` until it returns something truthy; fail with the last value after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or fn}: last={last!r}")


@contextmanager
def running_sims(state_dir: Path, specs: dict[str, list[str]]) -> Iterator[dict[str, SimProcess]]:
    """Start several sims in parallel, yield them ready, stop them and check they exit cleanly."""
    sims = {name: SimProcess(name, state_dir, args).start() for name, args in specs.items()}
    try:
        for sim in sims.values():
            sim.wait_ready(60)
        yield sims
    finally:
        codes = {name: sim.stop() for name, sim in sims.items()}
    bad = {n: c for n, c in codes.items() if c != 0}
    assert not bad, f"sims did not exit cleanly: {bad}: {[sims[n].log_tail() for n in bad]}"
    for name in sims:
        assert not (state_dir / f"{name}.json").exists(), "state file left behind"


def api_client(sim: SimProcess) -> client.ApiClient:
    return config.new_client_from_config(str(sim.kubeconfig), persist_config=False)


# The official client's models type every field Optional; tests read them as the API returns them.
def core_api(api: client.ApiClient) -> Any:
    return client.CoreV1Api(api)


def apps_api(api: client.ApiClient) -> Any:
    return client.AppsV1Api(api)


def batch_api(api: client.ApiClient) -> Any:
    return client.BatchV1Api(api)


def custom_api(api: client.ApiClient) -> Any:
    return client.CustomObjectsApi(api)
