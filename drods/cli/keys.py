"""``drods keys …``: the keys that encrypt data at rest — list them, rotate to a new one, retire an
old one (one that leaked) once nothing is sealed with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from drods.cli.config import ConfigOpt, checked_store_url

app = typer.Typer(help="Encryption keys of data at rest.", no_args_is_help=True)

DataDirOpt = Annotated[Path, typer.Option("--data-dir", envvar="DRODS_DATA_DIR",
                                          help="Where the keyring (keyring.json) is.")]
StoreOpt = Annotated[str | None, typer.Option(
    "--store", callback=checked_store_url, help="sqlite:///PATH or etcd://HOST:PORT[,…] "
                                                              "(default: the store the data dir's server serves from, "
                                                              "else its SQLite file)")]
DEFAULT_DIR = Path.home() / ".drods"


def _fail(message: str) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(1)


@app.command("list")
def list_keys(
    data_dir: DataDirOpt = DEFAULT_DIR,
    output: Annotated[str, typer.Option("--output", "-o", help="table or json")] = "table",
) -> None:
    """The key-encryption keys of the keyring (DATA_DIR's, or ``DRODS_KEYRING``): each one's ID, whether
    it is the primary (the one new writes are sealed with) and when it was added, where known. Key
    material is never shown."""
    import os

    from drods.security.envelope import ENV_VAR, KEYRING_FILE, Keyring

    if not (os.environ.get(ENV_VAR) or (data_dir / KEYRING_FILE).exists()):
        raise _fail(f"no keyring in {data_dir} (nor {ENV_VAR}): the control plane makes one when it first starts")
    try:
        doc = Keyring.load(data_dir).document()
    except (ValueError, KeyError, OSError) as e:
        raise _fail(f"the keyring cannot be read: {e}") from e
    rows = [{"id": k, "primary": k == doc.primary, "added": doc.added.get(k)}
            for k in sorted(doc.keys, key=lambda k: (len(k), k))]
    if output == "json":
        typer.echo(json.dumps({"primary": doc.primary, "items": rows}, indent=2))
        return
    if output != "table":
        raise typer.BadParameter("table or json", param_hint="--output")
    from drods.cli.remote import print_table

    print_table(["id", "primary", "added"], [[r["id"], "yes" if r["primary"] else "", r["added"] or "unknown"]
                                             for r in rows])


@app.command("retire")
def retire(
    key_id: Annotated[str | None, typer.Argument(help="the KEK's ID (`drods keys list`)")] = None,
    all_but_primary: Annotated[bool, typer.Option("--all-but-primary",
                                                  help="retire every key but the primary")] = False,
    data_dir: DataDirOpt = DEFAULT_DIR,
    store: StoreOpt = None,
    config_file: ConfigOpt = None,
    settle: Annotated[float, typer.Option("--settle-seconds", help="wait for running servers to re-read the "
                                                                   "keyring before looking again")] = 2.0,
) -> None:
    """Remove an old key-encryption key from the keyring — after `drods keys rotate`, once nothing is
    sealed with it: refused (exit 1, the keyring unchanged) for the primary key or while any stored
    object or Cluster credential still is. The store's history is then compacted: older revisions may
    hold values the key sealed. Prints what was done as JSON."""
    import asyncio

    from drods.assembly import encrypted_store
    from drods.config import ConfigError, resolve
    from drods.security.envelope import KEYRING_FILE
    from drods.security.files import make_private
    from drods.security.rotation import KeyInUse, Retirement
    from drods.security.rotation import retire as run
    from drods.store import open_store, served_store_url

    if (key_id is None) == (not all_but_primary):
        raise typer.BadParameter("name one key (KEY_ID) or give --all-but-primary", param_hint="KEY_ID")
    if not (data_dir / KEYRING_FILE).exists():
        raise _fail(f"no keyring file in {data_dir}: a keyring from DRODS_KEYRING is changed there")
    try:
        encryption = resolve(data_dir, config_file).config.encryption
    except ConfigError as e:
        raise typer.BadParameter(str(e), param_hint="--config") from e

    async def main() -> Retirement | None:
        make_private(data_dir)
        s = encrypted_store(open_store(store or served_store_url(data_dir)), data_dir, encryption)
        try:
            doc = s.envelope.keyring.document()
            ids = [key_id] if key_id is not None else [k for k in doc.keys if k != doc.primary]
            return await run(s, ids, settle_seconds=settle) if ids else None
        finally:
            await s.close()

    try:
        done = asyncio.run(main())
    except KeyInUse as e:
        raise _fail(f"not retired: {e}") from e
    except KeyError as e:
        raise _fail(f"no key-encryption key {e.args[0]} in the keyring (`drods keys list`)") from e
    except ValueError as e:
        raise _fail(str(e)) from e
    if done is None:
        typer.echo(json.dumps({"retired": [], "message": "the keyring holds the primary key only"}))
        return
    typer.echo(json.dumps({"retired": done.retired, "primary": done.primary, "keys": done.remaining,
                           "historyCompactedTo": done.compacted_to}))


@app.command("rotate")
def rotate(
    data_dir: DataDirOpt = DEFAULT_DIR,
    store: StoreOpt = None,
    config_file: ConfigOpt = None,
    settle: Annotated[float, typer.Option("--settle-seconds", help="wait for running servers to take the "
                                                                   "new key before re-encrypting")] = 2.0,
) -> None:
    """Add a key-encryption key, make it primary, and re-encrypt with it every object of the kinds the
    configuration's ``encryption`` section lists (those stored before their kind was listed too) and
    every Cluster credential; objects of kinds no longer listed are stored in plaintext again. The
    control plane keeps running; the old keys stay in the keyring until `drods keys retire`. Prints
    what was done as JSON."""
    import asyncio

    from drods.assembly import encrypted_store
    from drods.config import ConfigError, resolve
    from drods.security.files import make_private
    from drods.security.rotation import rotate as run
    from drods.store import open_store, served_store_url

    try:
        encryption = resolve(data_dir, config_file).config.encryption
    except ConfigError as e:
        raise typer.BadParameter(str(e), param_hint="--config") from e

    async def main() -> dict[str, object]:
        make_private(data_dir)
        s = encrypted_store(open_store(store or served_store_url(data_dir)), data_dir, encryption)
        try:
            r = await run(s, data_dir, settle_seconds=settle)
        finally:
            await s.close()
        return {"primary": r.primary, "objectsReencrypted": r.objects, "objectsUnsealed": r.unsealed,
                "fieldsResealed": r.fields, "passes": r.passes}

    typer.echo(json.dumps(asyncio.run(main())))
