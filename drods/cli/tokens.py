"""``drods token list`` and ``drods token revoke ID``: the store's record of issued tokens
(`drods.security.tokens`), and `mint`, through which every command that signs a token records it.
Issuing and revoking are in the audit log (SEC3), by ``cli:<the local user>``, in the transaction
that writes the token's record.

`mint` signs with the data dir's key, the one its server signs with. It never makes one silently:
in a fresh data dir (nothing of a server's in it) it makes it and says so on stderr — such a token
is accepted only by a server started with that data dir — and in one that holds a server's store but
no key (its server signs with ``DRODS_JWT_SECRET``) it refuses, rather than print a token that
server refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from drods.cli.config import checked_store_url

if TYPE_CHECKING:
    from collections.abc import Callable

    from drods.api.auth import Role
    from drods.security.tokens import TokenRecord
    from drods.store import Store
    from drods.store.base import Put

# what a server leaves in its data dir when it has started once (`drods.api.context`, `drods.store`)
SERVER_STATE = ("drods.db", "store.url", "encryption.key")

DataDirOpt = Annotated[Path, typer.Option("--data-dir", envvar="DRODS_DATA_DIR", show_envvar=True,
                                          help="Keys and the embedded store live here.")]
StoreOpt = Annotated[str | None, typer.Option(
    "--store", callback=checked_store_url, help="sqlite:///PATH or etcd://… (default: the store the "
                                                              "data dir's server serves from, else its SQLite file)")]


def _open(store: str | None, data_dir: Path) -> Store:
    """The store, with the audit log's records of these commands sealed at rest with the keyring the
    control plane shares (DATA_DIR's or ``DRODS_KEYRING``; none yet: they are written as they are, and
    `drods keys rotate` seals them). The configuration file is not read, its imports would double the
    command's start: `drods keys rotate` unseals them where it seals no kind."""
    import os

    from drods.model.keys import AUDIT_PREFIX
    from drods.security.envelope import ENV_VAR, KEYRING_FILE, Envelope, Keyring
    from drods.security.files import make_private
    from drods.store import open_store, served_store_url
    from drods.store.encrypted import EncryptingStore

    make_private(data_dir)  # the SQLite file it may create is the control plane's: 0600 like the server's
    opened = open_store(store or served_store_url(data_dir))
    if not (os.environ.get(ENV_VAR) or (data_dir / KEYRING_FILE).exists()):
        return opened  # a keyring made here would be one no server knows
    return EncryptingStore(opened, Envelope(Keyring.load(data_dir)), (AUDIT_PREFIX,))


def local_operator() -> str:
    """Who runs this command, as the audit log names them: ``cli:<login name>`` (``cli`` when unknown)."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no login name and no passwd entry (a container's arbitrary uid)
        return "cli"


def _audit(s: Store) -> Callable[[str, TokenRecord], list[Put]]:
    from drods.api.audit import AuditLog

    return AuditLog(s).token_changes(local_operator())


def mint(data_dir: Path, store: str | None, role: Role, *, subject: str | None = None, cluster: str | None = None,
         ttl_seconds: int | None = 30 * 24 * 3600, namespaces: list[str] | None = None) -> str:
    """A token signed with DATA_DIR's key and recorded in ``store`` (default: the data dir's SQLite
    file) before it is returned: what `drods token create`, `drods kubeconfig` and `drods dev up`
    hand out. ``typer.BadParameter`` for claims that do not go together."""
    import asyncio

    from drods.api.auth import SECRET_ENV, TokenAuthority, WeakSigningKey, issue_recorded

    try:
        authority = TokenAuthority(signing_key(data_dir))
    except WeakSigningKey as e:
        raise typer.BadParameter(str(e), param_hint=SECRET_ENV) from e

    async def run() -> str:
        s = _open(store, data_dir)
        try:
            return await issue_recorded(authority, s, role, subject=subject, cluster=cluster,
                                        ttl_seconds=ttl_seconds, namespaces=namespaces, audit=_audit(s))
        finally:
            await s.close()

    try:
        return asyncio.run(run())
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e


def signing_key(data_dir: Path) -> bytes:
    """The key tokens of ``data_dir``'s server are signed with: ``DRODS_JWT_SECRET``, else its
    ``jwt.key``. Made only in a data dir no server has used, and said on stderr: a token signed with a
    key made here is refused by a server started with any other ``--data-dir`` (the default,
    ``~/.drods``, is made when the option is forgotten). ``typer.BadParameter`` for a data dir that holds
    a server's store but no key: its server signs with a secret this command was not given."""
    import os

    from drods.api.auth import SECRET_ENV, load_or_create_signing_key

    path = data_dir / "jwt.key"
    if os.environ.get(SECRET_ENV) or path.exists():
        return load_or_create_signing_key(path)
    found = [name for name in SERVER_STATE if (data_dir / name).exists()]
    if found:
        raise typer.BadParameter(
            f"{data_dir} holds a server's state ({', '.join(found)}) but no signing key ({path.name}): its server "
            f"signs with {SECRET_ENV}, or another data dir's key. Set {SECRET_ENV} as the server has it, or pass "
            "the server's --data-dir; no key is made here, as no server would accept its tokens",
            param_hint="--data-dir")
    key = load_or_create_signing_key(path)
    typer.echo(f"warning: made a new signing key in {path}; only a server started with --data-dir {data_dir} "
               "accepts this token — a server started with another --data-dir will not (pass its --data-dir, or "
               f"set {SECRET_ENV} as it has it)", err=True)
    return key


def register_token_commands(token_app: typer.Typer) -> None:
    default_dir = Path.home() / ".drods"

    @token_app.command("list")
    def token_list(data_dir: DataDirOpt = default_dir, store: StoreOpt = None,
                   output: Annotated[str, typer.Option("--output", "-o", help="table or json")] = "table") -> None:
        """The live tokens: not expired, not revoked."""
        import asyncio
        from dataclasses import asdict

        from drods.cli.remote import print_table
        from drods.model.timefmt import rfc3339
        from drods.security.tokens import live

        async def read() -> list[dict[str, object]]:
            s = _open(store, data_dir)
            try:
                return [asdict(r) for r in await live(s)]
            finally:
                await s.close()

        rows = asyncio.run(read())
        if output == "json":
            typer.echo(json.dumps({"items": rows}, indent=2))
            return
        print_table(["id", "subject", "role", "namespaces", "cluster", "expires"],
                    [[r["id"], r["subject"], r["role"], _namespaces(r),
                      r["cluster"] or "", rfc3339(r["expiresAt"]) if r["expiresAt"] else "never"]  # type: ignore[arg-type]
                     for r in rows])

    @token_app.command("revoke")
    def token_revoke(token_id: Annotated[str, typer.Argument(help="the token's ID (`drods token list`)")],
                     data_dir: DataDirOpt = default_dir, store: StoreOpt = None) -> None:
        """Revoke a token: every API server refuses it within moments, whatever its expiry."""
        import asyncio

        from drods.security.tokens import revoke

        async def run() -> bool:
            s = _open(store, data_dir)
            try:
                return await revoke(s, token_id, audit=_audit(s)) is not None
            finally:
                await s.close()

        if not asyncio.run(run()):
            typer.echo(f"Error: no token {token_id!r} was recorded in this store", err=True)
            raise typer.Exit(1)
        typer.echo(f"token {token_id} revoked")


def _namespaces(row: dict[str, object]) -> str:
    """The NAMESPACES column: the token's namespaces, ``*`` for every one, ``-`` where none apply (a
    cluster-agent reports for its cluster, not on namespaced objects)."""
    if row["role"] == "cluster-agent":
        return "-"
    names = row.get("namespaces")
    return ",".join(str(n) for n in names) if isinstance(names, list | tuple) and names else "*"
