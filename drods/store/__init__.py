"""Store backends behind one interface; ``open_store`` picks one from a URL."""

from __future__ import annotations

from drods.store.base import (
    CasFailed,
    Compacted,
    Compare,
    Delete,
    EventType,
    Get,
    KeyValue,
    Lease,
    LeaseNotFound,
    Put,
    Store,
    StoreError,
    TxnResult,
    Unavailable,
    WatchEvent,
    prefix_end,
)

__all__ = [
    "CasFailed", "Compacted", "Compare", "Delete", "EventType", "Get", "KeyValue", "Lease",
    "LeaseNotFound", "Put", "Store", "StoreError", "TxnResult", "Unavailable", "WatchEvent",
    "open_store", "prefix_end",
]


def open_store(url: str) -> Store:
    """``sqlite:///abs/path.db`` or ``etcd://host:port[,host:port...]``."""
    if url.startswith("sqlite://"):
        from drods.store.sqlite import SqliteStore

        path = url.removeprefix("sqlite://")
        if not path:
            raise ValueError("sqlite URL needs a path: sqlite:///path/to/drods.db")
        return SqliteStore(path)
    if url.startswith("etcd://"):
        from drods.store.etcd import EtcdStore

        endpoints = [e for e in url.removeprefix("etcd://").strip("/").split(",") if e]
        if not endpoints:
            raise ValueError("etcd URL needs at least one host:port")
        return EtcdStore(endpoints)
    raise ValueError(f"unknown store URL {url!r}: use sqlite:///PATH or etcd://HOST:PORT[,HOST:PORT]")
