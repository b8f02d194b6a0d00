"""``drods config``: the configuration file (``drods.yaml``, docs/configuration.md), and the
``--config`` option every server process takes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from drods.assembly import ComponentSettings

config_app = typer.Typer(help="The configuration file (drods.yaml).", no_args_is_help=True)

ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="Configuration file (default: $DRODS_CONFIG, else DATA_DIR/drods.yaml if present; "
                     "see `drods config default`).")]


def checked_store_url(url: str | None) -> str | None:
    """``--store``'s callback: a URL no store takes is a usage error (exit 2) before anything is
    recorded in the data dir or started (it was a traceback, and a recorded ``store.url`` that broke
    ``drods token`` afterwards)."""
    if url is not None:
        from drods.store import check_store_url

        try:
            check_store_url(url)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--store") from None
    return url


def checked_serving_pair(cert: str | None, key: str | None) -> None:
    """``--tls-cert``/``--tls-key`` that do not load as a server's pair are a usage error naming the flag."""
    from drods.security.tls import UnusableServingPair, check_serving_pair

    try:
        check_serving_pair(cert, key)
    except UnusableServingPair as e:
        raise typer.BadParameter(str(e), param_hint=e.flag) from e


def component_settings(config: Path | None, data_dir: Path, *, profile: Path | None = None,
                       identity: str | None = None, lease_ttl: int = 10,
                       history_prometheus: str | None = None) -> ComponentSettings:
    """The process's configuration (file, old inputs, defaults) as its components' settings; an
    invalid one stops the process with its errors. ``history_prometheus`` (``--history-prometheus``)
    wins over the file's ``monitoring.historyBackend``/``historyPrometheusUrl``."""
    from drods.assembly import ComponentSettings
    from drods.config import ConfigError, resolve

    try:
        resolved = resolve(data_dir, config, profile=profile)
    except ConfigError as e:
        raise typer.BadParameter(str(e), param_hint="--config") from e
    settings = ComponentSettings.from_config(resolved.config, identity=identity, lease_ttl=lease_ttl)
    if history_prometheus:
        base = settings.monitoring or resolved.config.monitoring
        settings.monitoring = base.model_copy(update={"historyBackend": "prometheus",
                                                      "historyPrometheusUrl": history_prometheus})
    return settings


@config_app.command("default")
def default() -> None:
    """Print the whole configuration file with every default (a starting point for drods.yaml)."""
    from drods.config import default_yaml

    typer.echo(default_yaml(), nl=False)


@config_app.command("view")
def view(
    config: ConfigOpt = None,
    data_dir: Annotated[Path, typer.Option("--data-dir", envvar="DRODS_DATA_DIR")] = Path(
        os.environ.get("DRODS_DATA_DIR", str(Path.home() / ".drods"))),
) -> None:
    """Print the configuration a process started with these options would run with (the file,
    the deprecated inputs mapped onto it, the defaults), or its errors."""
    import yaml

    from drods.config import ConfigError, resolve

    try:
        resolved = resolve(data_dir, config)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from e
    typer.echo(f"# from {resolved.path or 'the defaults'}"
               + "".join(f"\n# deprecated input: {src}" for src in resolved.deprecated))
    typer.echo(yaml.safe_dump(resolved.config.model_dump(mode="json"), sort_keys=False), nl=False)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
