"""The ``encryption`` section (SEC2): which kinds a process seals is what its configuration file
lists; a value stored before its kind was listed reads as it is, and ``drods keys rotate`` brings the
store in line with the list (sealing kinds added, unsealing kinds taken off)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from drods.assembly import SCHEDULER, ComponentSettings, assemble, encrypted_store
from drods.cli.main import app
from drods.config import ConfigError, parse
from drods.model.keys import AUDIT_PREFIX, SYNC_CONFIGS_PREFIX
from drods.model.kinds import BINDING, CLUSTER, SECRET, TEMPLATE_KINDS, WORK, custom_resources_prefix
from drods.security.at_rest import DEFAULT_RESOURCES, EncryptionConfig, resource_name, sealable_prefixes
from drods.security.envelope import Envelope, Keyring
from drods.store import Store
from drods.store.sqlite import SqliteStore

HEAD = {"apiVersion": "config.drods.io/v1alpha1", "kind": "DRODSConfiguration"}
DEPLOYMENT = next(k for k in TEMPLATE_KINDS if k.kind == "Deployment")
CONFIG_MAP = next(k for k in TEMPLATE_KINDS if k.kind == "ConfigMap")


def _deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "task:1",
                                                                          "args": ["--token=task-config"]}]}}}}


def _config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"k": "task-config"}}


def test_the_default_seals_secrets_works_clusters_bindings_and_every_template_kind() -> None:
    config = parse(HEAD, "test")
    expected = {SECRET, WORK, CLUSTER, BINDING, *TEMPLATE_KINDS}
    assert set(config.encryption.resources) == set(DEFAULT_RESOURCES) == {resource_name(k) for k in expected}
    assert set(config.encryption.prefixes()) == {k.key_prefix() for k in expected} | {AUDIT_PREFIX, SYNC_CONFIGS_PREFIX}
    # nothing listed: not even the audit log — but domain configuration, sealed whatever the list says
    assert EncryptionConfig(resources=[]).prefixes() == (SYNC_CONFIGS_PREFIX,)


def test_resources_are_named_as_in_kubernetes_and_unknown_names_refused() -> None:
    c = EncryptionConfig(resources=["secrets", "*.apps", "widgets.example.com", "deployments.apps", "secrets"])
    assert c.resources == ["secrets", "*.apps", "widgets.example.com", "deployments.apps"]  # duplicates dropped
    assert set(c.prefixes()) == {"/audit/", SYNC_CONFIGS_PREFIX, "/registry/core/secrets/",
                                 "/registry/apps/deployments/", "/registry/apps/statefulsets/",
                                 "/registry/apps/daemonsets/", "/registry/apps/replicasets/",
                                 "/registry/apps/controllerrevisions/",
                                 custom_resources_prefix("example.com", "widgets")}
    everything = EncryptionConfig(resources=["*.*", "widgets.example.com"]).prefixes()
    assert set(everything) == set(sealable_prefixes())  # the custom kind is under /registry/custom/
    with pytest.raises(ConfigError) as refused:
        parse({**HEAD, "encryption": {"resources": ["deploymnets.apps", "*", "bindings"]}}, "drods.yaml")
    text = str(refused.value)
    assert "encryption.resources" in text and "'deploymnets.apps': no such kind" in text
    assert "'*'" in text and "'bindings': no such kind" in text
    with pytest.raises(ConfigError, match="encryption"):
        parse({**HEAD, "encryption": {"kinds": ["secrets"]}}, "drods.yaml")  # unknown keys refused


async def test_a_process_seals_what_its_configuration_lists(store: Store, tmp_path: Path) -> None:
    await store.delete_prefix("/")
    config = parse({**HEAD, "encryption": {"resources": ["deployments.apps", "bindings.multicluster.io"]}}, "t")
    plane = assemble(store, tmp_path, SCHEDULER, settings=ComponentSettings.from_config(config))
    registry = plane.context.registry
    await registry.create(DEPLOYMENT, _deployment("web"))
    await registry.create(CONFIG_MAP, _config_map("cfg"))
    await registry.create(BINDING, {"metadata": {"name": "b"}, "spec": {"replicas": 2}})
    envelope = Envelope(Keyring.load(tmp_path))
    raw = {k: (await store.get(k)) for k in (DEPLOYMENT.key("web", "default"), BINDING.key("b"),
                                             CONFIG_MAP.key("cfg", "default"))}
    sealed = {k: envelope.kek_of(kv.value) for k, kv in raw.items() if kv is not None}
    assert sealed == {DEPLOYMENT.key("web", "default"): "k1", BINDING.key("b"): "k1",
                      CONFIG_MAP.key("cfg", "default"): None}
    assert b"task-config" not in raw[DEPLOYMENT.key("web", "default")].value  # type: ignore[union-attr]
    got = await registry.get(DEPLOYMENT, "web", "default")
    assert got["spec"]["template"]["spec"]["containers"][0]["args"] == ["--token=task-config"]
    await plane.context.store.close()


def test_keys_rotate_brings_the_store_in_line_with_the_configured_list(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = f"sqlite://{data / 'drods.db'}"

    async def write() -> None:  # an older configuration: Deployments sealed, ConfigMaps not
        s = encrypted_store(SqliteStore(str(data / "drods.db")), data, EncryptionConfig(resources=["deployments.apps"]))
        await s.put(DEPLOYMENT.key("web", "default"), json.dumps(_deployment("web")).encode())
        await s.put(CONFIG_MAP.key("cfg", "default"), json.dumps(_config_map("cfg")).encode())
        await s.close()

    data.mkdir()
    asyncio.run(write())
    (data / "drods.yaml").write_text(json.dumps({**HEAD, "encryption": {"resources": ["configmaps"]}}))
    out = CliRunner().invoke(app, ["keys", "rotate", "--data-dir", str(data), "--store", db, "--settle-seconds", "0"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["primary"] == "k2" and report["objectsReencrypted"] == 1 and report["objectsUnsealed"] == 1

    async def read() -> dict[str, bytes]:
        s = SqliteStore(str(data / "drods.db"))
        kvs, _ = await s.range("/registry/")
        await s.close()
        return {kv.key: kv.value for kv in kvs}

    raw = asyncio.run(read())
    envelope = Envelope(Keyring.load(data))
    cfg, web = raw[CONFIG_MAP.key("cfg", "default")], raw[DEPLOYMENT.key("web", "default")]
    assert envelope.kek_of(cfg) == "k2" and b"task-config" not in cfg
    assert envelope.kek_of(web) is None and json.loads(web) == _deployment("web")
    assert json.loads(envelope.open(cfg, CONFIG_MAP.key("cfg", "default").encode())) == _config_map("cfg")


@pytest.mark.parametrize("resources", [None, []], ids=["default", "nothing-listed"])
async def test_domain_configuration_is_sealed_at_rest_whatever_the_list_says(
        tmp_path: Path, resources: list[str] | None) -> None:
    """``PUT /api/v1/sync/configs`` stores an opaque document that may hold passwords: none of it in
    the SQLite file or its WAL, whichever kinds the configuration lists."""
    from drods.api.auth import Role
    from drods.server import ServerConfig, build_app
    from tests.api.conftest import served

    data = tmp_path / "data"
    config = parse({**HEAD, **({"encryption": {"resources": resources}} if resources is not None else {})}, "t")
    raw = SqliteStore(str(tmp_path / "drods.db"))
    app = build_app(ServerConfig(store_url="unused://", data_dir=data,
                                 settings=ComponentSettings.from_config(config)), store=raw)
    admin = app.state.ctx.tokens.issue(Role.ADMIN)
    async with served(app, {"admin": admin}) as api:
        body = {"cluster": "c1", "configs": {"dbPassword": "SYNCCFG_MARKER"}}
        assert (await api.call("PUT", "/api/v1/sync/configs", json=body)).status_code == 200
        r = await api.call("GET", "/api/v1/sync/configs", params={"cluster": "c1"})
        assert r.json()["configs"] == {"dbPassword": "SYNCCFG_MARKER"}, r.text  # read back in the clear
        stored = await raw.get(f"{SYNC_CONFIGS_PREFIX}c1")
        assert stored is not None and Envelope(Keyring.load(data)).kek_of(stored.value) == "k1"
        files = {p.name: p.read_bytes() for p in tmp_path.iterdir()  # noqa: ASYNC240 - a test's few small files
                 if p.name.startswith("drods.db")}
        assert "drods.db-wal" in files or "drods.db" in files
        assert not [name for name, content in files.items() if b"SYNCCFG_MARKER" in content]
