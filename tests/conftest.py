"""Shared fixtures: a real etcd for the session, and stores of every backend."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator

import orjson
import pytest

from drods.members.pod_cache import POD_PARTS
from drods.model import jsondoc
from drods.store import Store
from tests.etcd_server import EtcdCluster, etcd_binary


@pytest.fixture(autouse=True)
def shared_parts_unchanged() -> Iterator[None]:
    """No code changes a part the shared informer of Bindings or a member's pod cache shares between
    documents (`jsondoc.shared_parts`): every pooled container still encodes to the key it was pooled under."""
    yield
    changed = [key for pool in (jsondoc.shared_containers, POD_PARTS) for key, part in pool.entries()
               if orjson.dumps(part) != key]
    assert not changed, f"shared document parts were changed in place: {changed[:3]!r}"


@pytest.fixture(scope="session")
def etcd_endpoint() -> Iterator[str]:
    """``host:port`` of a one-member etcd started for this test session."""
    if etcd_binary() is None:
        message = "etcd binary not found (apt-get install etcd-server, or set ETCD_BINARY)"
        if os.environ.get("DRODS_REQUIRE_ETCD") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with EtcdCluster(1) as cluster:
        yield cluster.endpoints[0]


@pytest.fixture(params=["sqlite", "etcd"])
def store_factory(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Callable[[], Store]:
    """Opens a new client of one backend; every store it opens in a test sees the same data."""
    if request.param == "sqlite":
        from drods.store.sqlite import SqliteStore

        path = os.path.join(tmp_path, "drods.db")
        return lambda: SqliteStore(path)
    from drods.store.etcd import EtcdStore

    endpoint = request.getfixturevalue("etcd_endpoint")
    return lambda: EtcdStore([endpoint])


@pytest.fixture
async def store(store_factory: Callable[[], Store]) -> AsyncIterator[Store]:
    """A store of each backend (the test runs once per backend), closed afterwards."""
    s = store_factory()
    yield s
    await s.close()
