"""The ``drods`` command: servers, tokens and the client verbs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import yaml

from drods.api.auth import Role
from drods.cli.config import ConfigOpt, checked_serving_pair, checked_store_url, component_settings

if TYPE_CHECKING:
    from drods.assembly import ComponentSettings

app = typer.Typer(help="DRO-DS: cross-domain resource orchestration and dynamic scheduling.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
token_app = typer.Typer(help="Make API tokens.", no_args_is_help=True)
app.add_typer(token_app, name="token")

DEFAULT_DATA_DIR = Path(os.environ.get("DRODS_DATA_DIR", str(Path.home() / ".drods")))

DataDir = Annotated[Path, typer.Option("--data-dir", envvar="DRODS_DATA_DIR", show_envvar=True,
                                       help="Keys, the embedded store and history live here.")]


def _server_config(store: str | None, host: str, port: int, data_dir: Path, tls_cert: str | None,
                   tls_key: str | None, jwks_url: str | None = None, jwt_public_key: Path | None = None,
                   insecure_http: bool = False, tls_san: list[str] | None = None):  # type: ignore[no-untyped-def]
    from drods.server import ServerConfig
    from drods.store import default_store_url

    checked_serving_pair(tls_cert, tls_key)
    if insecure_http and (tls_cert or tls_san):
        raise typer.BadParameter("--insecure-http serves plain HTTP: no --tls-cert/--tls-key/--tls-san")
    _check_signing_secret()
    return ServerConfig(store_url=store or default_store_url(data_dir), data_dir=data_dir, host=host, port=port,
                        tls_cert=tls_cert, tls_key=tls_key, insecure_http=insecure_http,
                        tls_sans=tuple(tls_san or ()), jwks_url=jwks_url,
                        rs256_public_key=jwt_public_key.read_text() if jwt_public_key else None)


def _check_signing_secret() -> None:
    """A ``DRODS_JWT_SECRET`` too short to be safe stops the process before it serves."""
    from drods.api.auth import SECRET_ENV, WeakSigningKey, check_signing_key

    secret = os.environ.get(SECRET_ENV)
    if secret:
        try:
            check_signing_key(secret.encode(), SECRET_ENV)
        except WeakSigningKey as e:
            raise typer.BadParameter(str(e), param_hint=SECRET_ENV) from e


def _with_token_checks(settings: ComponentSettings, jwt_issuer: str | None,
                       jwt_audience: str | None) -> ComponentSettings:
    """``settings`` with ``--jwt-issuer``/``--jwt-audience`` over the file's ``api.jwtIssuer``/``api.jwtAudience``."""
    update = {k: v for k, v in (("jwtIssuer", jwt_issuer), ("jwtAudience", jwt_audience)) if v}
    if update:
        settings.api = settings.api.model_copy(update=update)
    return settings


StoreOpt = Annotated[str | None, typer.Option("--store", callback=checked_store_url, help="sqlite:///PATH or etcd://HOST:PORT[,HOST:PORT…]")]
HostOpt = Annotated[str, typer.Option("--host")]
PortOpt = Annotated[int, typer.Option("--port")]
CertOpt = Annotated[str | None, typer.Option("--tls-cert", help="serve with this certificate (PEM) instead of "
                                                              "the one made in DATA_DIR/tls")]
KeyOpt = Annotated[str | None, typer.Option("--tls-key", help="the key of --tls-cert")]
SanOpt = Annotated[list[str] | None, typer.Option("--tls-san", help="another DNS name or IP address for the "
                                                                    "certificate made in DATA_DIR/tls (repeatable)")]
InsecureHttpOpt = Annotated[bool, typer.Option("--insecure-http", help="serve plain HTTP (kubectl then sends no "
                                                                       "token)")]
JwksOpt = Annotated[str | None, typer.Option("--jwks-url", help="also accept RS256 tokens signed by this JWKS")]
PubKeyOpt = Annotated[Path | None, typer.Option("--jwt-public-key", help="also accept RS256 tokens of this PEM key")]
IssuerOpt = Annotated[str | None, typer.Option("--jwt-issuer", help="the iss an RS256 token (--jwt-public-key, "
                                                                     "--jwks-url) must name (api.jwtIssuer)")]
AudienceOpt = Annotated[str | None, typer.Option("--jwt-audience", help="the aud an RS256 token must name "
                                                                         "(api.jwtAudience)")]
HistoryPromOpt = Annotated[str | None, typer.Option(
    "--history-prometheus", help="Keep metric history in this Prometheus (remote-write receiver on), shared by "
    "every API server; default: the SQLite file in the data dir.")]


@app.command()
def serve(store: StoreOpt = None, host: HostOpt = "127.0.0.1", port: PortOpt = 8080,
          data_dir: DataDir = DEFAULT_DATA_DIR, tls_cert: CertOpt = None, tls_key: KeyOpt = None,
          tls_san: SanOpt = None, insecure_http: InsecureHttpOpt = False,
          jwks_url: JwksOpt = None, jwt_public_key: PubKeyOpt = None, jwt_issuer: IssuerOpt = None,
          jwt_audience: AudienceOpt = None, config_file: ConfigOpt = None,
          history_prometheus: HistoryPromOpt = None) -> None:
    """Run the whole control plane in one process (API server, scheduler, controllers, monitoring).

    Serves HTTPS: on first start a CA and a serving certificate are made in DATA_DIR/tls
    (`drods kubeconfig` embeds the CA; curl --cacert DATA_DIR/tls/ca.crt)."""
    from drods.assembly import SERVE
    from drods.server import run

    config = _server_config(store, host, port, data_dir, tls_cert, tls_key, jwks_url, jwt_public_key,
                            insecure_http, tls_san)
    config.components = SERVE
    settings = component_settings(config_file, data_dir, history_prometheus=history_prometheus)
    config.settings = _with_token_checks(settings, jwt_issuer, jwt_audience)
    run(config)


@app.command()
def apiserver(store: StoreOpt = None, host: HostOpt = "127.0.0.1", port: PortOpt = 8080,
              data_dir: DataDir = DEFAULT_DATA_DIR, tls_cert: CertOpt = None, tls_key: KeyOpt = None,
              tls_san: SanOpt = None, insecure_http: InsecureHttpOpt = False,
              jwks_url: JwksOpt = None, jwt_public_key: PubKeyOpt = None, jwt_issuer: IssuerOpt = None,
              jwt_audience: AudienceOpt = None, config_file: ConfigOpt = None,
              history_prometheus: HistoryPromOpt = None) -> None:
    """Run only the API server with monitoring ingest (stateless; run several over etcd, sharing
    DATA_DIR/tls or given --tls-cert/--tls-key)."""
    from drods.server import run

    config = _server_config(store, host, port, data_dir, tls_cert, tls_key, jwks_url, jwt_public_key,
                            insecure_http, tls_san)
    settings = component_settings(config_file, data_dir, history_prometheus=history_prometheus)
    config.settings = _with_token_checks(settings, jwt_issuer, jwt_audience)
    run(config)


@token_app.command("create")
def token_create(
    role: Annotated[Role, typer.Option("--role", help="admin | operator | viewer | cluster-agent")],
    cluster: Annotated[str | None, typer.Option("--cluster", help="the cluster a cluster-agent reports for")] = None,
    subject: Annotated[str | None, typer.Option("--subject", help="who the token is for (audit log)")] = None,
    ttl: Annotated[int, typer.Option("--ttl", min=0, help="lifetime in seconds (0 = never expires)")] = 30 * 24 * 3600,
    namespace: Annotated[list[str] | None, typer.Option(
        "--namespace", help="limit an operator or viewer token to this namespace (repeatable)")] = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    store: Annotated[str | None, typer.Option(
        "--store", help="where the token is recorded (default: the store the data dir's server serves from, "
        "else its SQLite file)")] = None,
) -> None:
    """Print a signed token on stdout (and nothing else); its ID and claims (never the token) are
    recorded in the store for `drods token list` and `drods token revoke`."""
    from drods.cli.tokens import mint

    token = mint(data_dir, store, role, subject=subject, cluster=cluster, ttl_seconds=ttl or None,
                 namespaces=namespace or None)
    if not ttl:
        typer.echo(f"warning: --ttl 0: this {role.value} token never expires; only `drods token revoke` "
                   "(its ID: `drods token list`) ends it", err=True)
    typer.echo(token)


@app.command()
def kubeconfig(
    ctx: typer.Context,
    server: Annotated[str, typer.Option("--server", envvar="DRODS_SERVER")] = "https://127.0.0.1:8080",
    token: Annotated[str | None, typer.Option("--token", envvar="DRODS_TOKEN", help="the token to embed (else one "
                                              "is minted; --role mints one even with DRODS_TOKEN set)")] = None,
    role: Annotated[Role | None, typer.Option("--role", help="role of the token minted (default admin)")] = None,
    ca_file: Annotated[Path | None, typer.Option("--ca-file", envvar="DRODS_CA_FILE",
                                                 help="CA certificate of the server (default: DATA_DIR/tls/ca.crt)")]
    = None,
    ttl: Annotated[int, typer.Option("--ttl", min=0, help="lifetime in seconds of the token minted without --token "
                                                   "(0 = never expires)")] = 30 * 24 * 3600,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    store: Annotated[str | None, typer.Option(
        "--store", help="where the minted token is recorded (default: the store the data dir's server serves "
        "from, else its SQLite file)")] = None,
) -> None:
    """Print a kubeconfig that points kubectl at DRO-DS, with the server's CA embedded. Without
    --token it carries a new token (subject ``kubectl``), recorded in the server's store like one
    of `drods token create`: `drods token list` shows it, `drods token revoke` shuts it out."""
    import base64

    from drods.cli.tokens import mint
    from drods.security.trust import data_dir_ca

    ca = ca_file if ca_file and str(ca_file) not in ("", ".") else data_dir_ca(data_dir)
    if server.startswith("https://") and not ca.is_file():
        raise typer.BadParameter(f"{ca} not found: start `drods serve` once (it makes the CA) or pass "
                                 "the server's CA with --ca-file", param_hint="--ca-file")
    if token is not None and role is not None:
        source = ctx.get_parameter_source("token")
        if getattr(source, "name", None) != "ENVIRONMENT":  # typer's own click: its enum, compared by name
            raise typer.BadParameter("--token embeds a token, --role mints a new one: give one of them",
                                     param_hint="--role")
        token = None  # --role asks for a new token: DRODS_TOKEN (the caller's own) is not it
    if token is None:
        token = mint(data_dir, store, role or Role.ADMIN, subject="kubectl", ttl_seconds=ttl or None)
    cluster: dict[str, object] = {"server": server}
    if server.startswith("https://"):
        cluster["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    else:
        typer.echo("warning: kubectl sends tokens only over HTTPS; a server started with --insecure-http "
                   "cannot be used with kubectl", err=True)
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "drods",
        "clusters": [{"name": "drods", "cluster": cluster}],
        "users": [{"name": "drods", "user": {"token": token}}],
        "contexts": [{"name": "drods", "context": {"cluster": "drods", "user": "drods",
                                                   "namespace": _context_namespace(token)}}],
    }
    typer.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)


def _context_namespace(token: str) -> str:
    """The kubeconfig context's namespace: a namespace-limited token's first namespace (``default`` would
    be refused to it at kubectl's first command), else ``default``. Read without the signature: the
    server checks it; this only picks where kubectl starts."""
    import jwt

    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return "default"
    namespaces = claims.get("namespaces")
    if isinstance(namespaces, list) and namespaces and all(isinstance(n, str) for n in namespaces):
        return "default" if "default" in namespaces else sorted(namespaces)[0]
    return "default"


def _register_client_commands() -> None:
    import importlib

    try:
        client = importlib.import_module("drods.cli.client")
    except ImportError:
        return
    client.register(app)


_register_client_commands()
__import__("drods.cli.tokens", fromlist=["x"]).register_token_commands(token_app)  # drods token list|revoke
app.add_typer(__import__("drods.cli.sim", fromlist=["app"]).app, name="sim")  # drods sim … (member clusters)
app.add_typer(__import__("drods.cli.top", fromlist=["app"]).app, name="top")  # drods top clusters
app.add_typer(__import__("drods.cli.keys", fromlist=["app"]).app, name="keys")  # drods keys rotate
app.command("agent")(__import__("drods.cli.agent", fromlist=["agent"]).agent)  # a member's metrics agent

if __name__ == "__main__":  # python -m drods.cli.main …
    app(prog_name="drods")
