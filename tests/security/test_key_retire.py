"""``drods keys list`` and ``drods keys retire`` (SEC2), as an operator uses them after a key leaked:
rotate, retire the old key-encryption key, and everything stays readable — by a restarted process
and by one that ran throughout; the primary key, or a key anything is still sealed with, is refused
and the keyring left as it was."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from drods.assembly import SCHEDULER, assemble, encrypted_store
from drods.cli.main import app
from drods.model.kinds import CLUSTER, SECRET
from drods.security.envelope import DecryptionFailed, Envelope, Keyring
from drods.store.sqlite import SqliteStore

PASSWORD = "retire-me-pw"
CRED = "kubeconfig-token-retire"


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["keys", *args])


def _keyring(data: Path) -> dict[str, Any]:
    return json.loads((data / "keyring.json").read_text())  # type: ignore[no-any-return]


async def _write(data: Path) -> None:
    """A Secret (sealed whole) and a Cluster with credentials (sealed whole and field by field)."""
    plane = assemble(SqliteStore(str(data / "drods.db")), data, SCHEDULER)
    registry = plane.context.registry
    await registry.create(SECRET, {"apiVersion": "v1", "kind": "Secret",
                                   "metadata": {"name": "db", "namespace": "default"},
                                   "data": {"password": base64.b64encode(PASSWORD.encode()).decode()}})
    await registry.create(CLUSTER, {"metadata": {"name": "edge"},
                                    "spec": {"syncMode": "Pull", "credentials": {"token": CRED}}})
    await plane.context.store.close()


async def _read(data: Path) -> tuple[str, Any]:
    """What a process started now reads: the Secret's password and the Cluster's credentials."""
    plane = assemble(SqliteStore(str(data / "drods.db")), data, SCHEDULER)
    try:
        secret = await plane.context.registry.get(SECRET, "db", "default")
        kv = await plane.context.store.get(CLUSTER.key("edge"))
        assert kv is not None
        spec = json.loads(kv.value)["spec"]
        return base64.b64decode(secret["data"]["password"]).decode(), \
            plane.context.registry.secrets.reveal(spec, CLUSTER.secret_paths)["credentials"]
    finally:
        await plane.context.store.close()


def test_an_old_key_is_retired_after_rotation_and_refused_while_in_use(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = ["--data-dir", str(data), "--store", f"sqlite://{data / 'drods.db'}", "--settle-seconds", "0"]
    asyncio.run(_write(data))

    listed = _cli("list", "--data-dir", str(data), "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert [(k["id"], k["primary"]) for k in json.loads(listed.stdout)["items"]] == [("k1", True)]
    assert json.loads(listed.stdout)["items"][0]["added"]  # when it was made

    # the primary: refused, nothing changed
    before = (data / "keyring.json").read_bytes()
    out = _cli("retire", "k1", *db)
    assert out.exit_code == 1 and "primary" in out.output and "drods keys rotate" in out.output, out.output
    assert (data / "keyring.json").read_bytes() == before

    # a new primary but nothing re-encrypted yet (a rotation cut short): k1 still seals both
    Keyring.load(data).rotate()
    before = (data / "keyring.json").read_bytes()
    out = _cli("retire", "k1", *db)
    assert out.exit_code == 1, out.output
    assert "k1: 2 stored object(s) and 1 Cluster credential(s)" in out.output, out.output  # the Secret, the Cluster
    assert "drods keys rotate" in out.output
    assert (data / "keyring.json").read_bytes() == before
    out = _cli("retire", "--all-but-primary", *db)
    assert out.exit_code == 1 and "k1:" in out.output and (data / "keyring.json").read_bytes() == before
    assert _cli("retire", "k9", *db).exit_code == 1

    # a process that runs throughout: it has read k1 values and holds their data keys
    running = encrypted_store(SqliteStore(str(data / "drods.db")), data)

    async def running_reads() -> bytes:
        kv = await running.get(SECRET.key("db", "default"))
        assert kv is not None
        return kv.value

    assert PASSWORD.encode() in base64.b64decode(json.loads(asyncio.run(running_reads()))["data"]["password"])
    old_value = asyncio.run(running.inner.get(SECRET.key("db", "default")))
    assert old_value is not None and running.envelope.kek_of(old_value.value) == "k1"

    # rotate (k3 primary, everything sealed again), then retire what is no longer used
    out = CliRunner().invoke(app, ["keys", "rotate", *db])
    assert out.exit_code == 0 and json.loads(out.stdout)["primary"] == "k3", out.output
    out = _cli("retire", "--all-but-primary", *db)
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["retired"] == ["k1", "k2"] and report["keys"] == ["k3"] and report["primary"] == "k3", report
    assert set(_keyring(data)["keys"]) == {"k3"} and _keyring(data)["primary"] == "k3"
    assert (data / "keyring.json").stat().st_mode & 0o777 == 0o600
    table = _cli("list", "--data-dir", str(data))
    assert table.exit_code == 0 and "k3" in table.stdout and "k1" not in table.stdout, table.output

    # a restarted process reads everything; the running one goes on reading and writing, and a
    # value its retired key sealed (a backup's, say) opens no more — cached data key or not
    assert asyncio.run(_read(data)) == (PASSWORD, {"token": CRED})

    async def running_goes_on() -> None:
        running.envelope.keyring._checked = 0.0  # the file is checked at most once a second: now
        kv = await running.get(SECRET.key("db", "default"))
        assert kv is not None and PASSWORD.encode() in base64.b64decode(json.loads(kv.value)["data"]["password"])
        await running.put(SECRET.key("later", "default"), b'{"data": {}}')
        raw = await running.inner.get(SECRET.key("later", "default"))
        assert raw is not None and running.envelope.kek_of(raw.value) == "k3"
        with pytest.raises(DecryptionFailed, match="unknown key-encryption key 'k1'"):
            running.envelope.open(old_value.value, SECRET.key("db", "default").encode())
        await running.close()

    asyncio.run(running_goes_on())
    assert Envelope(Keyring.load(data)).keyring.primary == "k3"


def test_retire_needs_one_key_or_all_but_primary(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert _cli("list", "--data-dir", str(data)).exit_code == 1  # no keyring: none made by listing
    assert not (data / "keyring.json").exists()
    Keyring.load(data)
    assert _cli("retire", "--data-dir", str(data)).exit_code == 2
    assert _cli("retire", "k1", "--all-but-primary", "--data-dir", str(data)).exit_code == 2
