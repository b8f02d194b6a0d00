"""``drods keys …``: the keys that encrypt data at rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from drods.cli.config import ConfigOpt

app = typer.Typer(help="Encryption keys of data at rest.", no_args_is_help=True)


@app.command("rotate")
def rotate(
    data_dir: Annotated[Path, typer.Option("--data-dir", envvar="DRODS_DATA_DIR",
                                           help="Where the keyring (keyring.json) is.")] = Path.home() / ".drods",
    store: Annotated[str | None, typer.Option("--store", help="sqlite:///PATH or etcd://HOST:PORT[,…] "
                                                              "(default: the store the data dir's server serves from, "
                                                              "else its SQLite file)")] = None,
    config_file: ConfigOpt = None,
    settle: Annotated[float, typer.Option("--settle-seconds", help="wait for running servers to take the "
                                                                   "new key before re-encrypting")] = 2.0,
) -> None:
    """Add a key-encryption key, make it primary, and re-encrypt with it every object of the kinds the
    configuration's ``encryption`` section lists (those stored before their kind was listed too) and
    every Cluster credential; objects of kinds no longer listed are stored in plaintext again. The
    control plane keeps running. Prints what was done as JSON."""
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
