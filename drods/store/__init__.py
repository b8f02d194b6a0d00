"""Store backends behind one interface; ``open_store`` picks one from a URL."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

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
    WriteFailed,
    prefix_end,
)

__all__ = [
    "CasFailed", "Compacted", "Compare", "Delete", "EventType", "Get", "KeyValue", "Lease",
    "LeaseNotFound", "Put", "Store", "StoreError", "TxnResult", "Unavailable", "WatchEvent", "WriteFailed",
    "check_store_url", "default_store_url", "open_store", "prefix_end", "record_served_store", "served_store_url",
]


def default_store_url(data_dir: Path) -> str:
    """The embedded store of a data directory: the SQLite file every process of it opens by default."""
    return f"sqlite://{(data_dir / 'drods.db').resolve()}"


SERVED_STORE_FILE = "store.url"


def record_served_store(data_dir: Path, url: str) -> None:
    """Note in ``data_dir`` the store a server process of it serves from (an etcd password left out:
    ``DRODS_ETCD_PASSWORD`` gives it, as to the server), so that the commands that share the data dir's
    keys — `drods token`, `drods kubeconfig`, `drods keys rotate` — write where the server reads."""
    parts = urlsplit(url)
    if parts.scheme == "etcd" and parts.password is not None:
        hosts = parts.netloc.rpartition("@")[2]
        url = urlunsplit(parts._replace(netloc=f"{parts.username}@{hosts}"))
    fd, tmp = tempfile.mkstemp(dir=data_dir, prefix=f".{SERVED_STORE_FILE}.")  # 0600; one per writer
    with os.fdopen(fd, "w") as f:  # several processes of a data dir start at once
        f.write(url + "\n")
    os.replace(tmp, data_dir / SERVED_STORE_FILE)


def served_store_url(data_dir: Path) -> str:
    """The store the data directory's server processes serve from: the one the last of them to start
    recorded (`record_served_store`), else the embedded one."""
    try:
        recorded = (data_dir / SERVED_STORE_FILE).read_text().strip()
    except OSError:
        recorded = ""
    return recorded or default_store_url(data_dir)


def open_store(url: str) -> Store:
    """``sqlite:///abs/path.db`` or ``etcd://[USER[:PASSWORD]@]host:port[,host:port...][?ca=F&cert=F&key=F]``.

    etcd: ``ca`` turns on TLS (the CA of etcd's certificate), ``cert``/``key`` are this client's
    certificate for ``--client-cert-auth``; a USER without PASSWORD takes it from
    ``DRODS_ETCD_PASSWORD`` (kept out of process listings)."""
    return _opener(url)()


def check_store_url(url: str) -> None:
    """``ValueError`` saying what is wrong with ``url`` (as `open_store` would), opening nothing: a
    command checks its ``--store`` before it records it or starts."""
    _opener(url)


def _opener(url: str) -> Callable[[], Store]:
    if url.startswith("sqlite://"):
        from drods.store.sqlite import SqliteStore

        path = url.removeprefix("sqlite://")
        if not path:
            raise ValueError("sqlite URL needs a path: sqlite:///path/to/drods.db")
        return lambda: SqliteStore(path)
    if url.startswith("etcd://"):
        from urllib.parse import parse_qs, unquote

        from drods.store.etcd import EtcdStore, EtcdTLS

        rest, _, query = url.removeprefix("etcd://").partition("?")
        userinfo, _, hosts = rest.rpartition("@")
        endpoints = [e for e in hosts.strip("/").split(",") if e]
        if not endpoints:
            raise ValueError("etcd URL needs at least one host:port")
        params = {k: v[-1] for k, v in parse_qs(query).items()}
        unknown = set(params) - {"ca", "cert", "key"}
        if unknown:
            raise ValueError(f"etcd URL: unknown parameters {sorted(unknown)} (ca, cert, key)")
        if ("cert" in params) != ("key" in params) or ("cert" in params and "ca" not in params):
            raise ValueError("etcd URL: cert and key go together, and need ca")
        tls = EtcdTLS(Path(params["ca"]), Path(params["cert"]) if "cert" in params else None,
                      Path(params["key"]) if "key" in params else None) if "ca" in params else None
        user = password = None
        if userinfo:
            name, sep, secret = userinfo.partition(":")
            user = unquote(name)
            password = unquote(secret) if sep else os.environ.get("DRODS_ETCD_PASSWORD")
            if password is None:
                raise ValueError("etcd URL names a user: give its password in the URL or DRODS_ETCD_PASSWORD")
        return lambda: EtcdStore(endpoints, tls=tls, username=user, password=password)
    raise ValueError(f"unknown store URL {url!r}: use sqlite:///PATH or etcd://HOST:PORT[,HOST:PORT]")
