"""``drods token list`` and ``drods token revoke ID``: the store's record of issued tokens
(`drods.security.tokens`), and `mint`, through which every command that signs a token records it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from drods.api.auth import Role
    from drods.store import Store

DataDirOpt = Annotated[Path, typer.Option("--data-dir", envvar="DRODS_DATA_DIR", show_envvar=True,
                                          help="Keys and the embedded store live here.")]
StoreOpt = Annotated[str | None, typer.Option("--store", help="sqlite:///PATH or etcd://… (default: the store the "
                                                              "data dir's server serves from, else its SQLite file)")]


def _open(store: str | None, data_dir: Path) -> Store:
    from drods.security.files import make_private
    from drods.store import open_store, served_store_url

    make_private(data_dir)  # the SQLite file it may create is the control plane's: 0600 like the server's
    return open_store(store or served_store_url(data_dir))


def mint(data_dir: Path, store: str | None, role: Role, *, subject: str | None = None, cluster: str | None = None,
         ttl_seconds: int | None = 30 * 24 * 3600, namespaces: list[str] | None = None) -> str:
    """A token signed with DATA_DIR's key and recorded in ``store`` (default: the data dir's SQLite
    file) before it is returned: what `drods token create`, `drods kubeconfig` and `drods dev up`
    hand out. ``typer.BadParameter`` for claims that do not go together."""
    import asyncio

    from drods.api.auth import TokenAuthority, issue_recorded, load_or_create_signing_key

    authority = TokenAuthority(load_or_create_signing_key(data_dir / "jwt.key"))

    async def run() -> str:
        s = _open(store, data_dir)
        try:
            return await issue_recorded(authority, s, role, subject=subject, cluster=cluster,
                                        ttl_seconds=ttl_seconds, namespaces=namespaces)
        finally:
            await s.close()

    try:
        return asyncio.run(run())
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e


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
                return await revoke(s, token_id) is not None
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
