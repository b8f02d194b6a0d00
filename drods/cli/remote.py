"""What every client command shares: the connection to a DRO-DS server, discovery, errors, output.

Commands in other modules (``drods cluster join``, ``drods top``, ``drods sim`` …) reuse these so
that flags, environment variables, error messages and exit codes stay the same across the CLI.
"""

from __future__ import annotations

import json
import math
import os
import ssl
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NoReturn, TextIO

import httpx
import typer
import yaml
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from drods.security.trust import client_context
from drods.transport import transport

DEFAULT_SERVER = "https://127.0.0.1:8080"
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

ServerOpt = Annotated[str, typer.Option("--server", "-s", envvar="DRODS_SERVER", show_envvar=True,
                                        help="DRO-DS API server URL.")]
TokenOpt = Annotated[str | None, typer.Option("--token", envvar="DRODS_TOKEN", show_envvar=True,
                                              help="Bearer token (make one with `drods token create`).")]
CaFileOpt = Annotated[str | None, typer.Option("--ca-file", envvar="DRODS_CA_FILE", show_envvar=True,
                                               help="CA certificate that signed a TLS server's certificate.")]
InsecureOpt = Annotated[bool, typer.Option("--insecure-skip-tls-verify", envvar="DRODS_INSECURE",
                                           help="Do not verify the server's TLS certificate.")]
OutputOpt = Annotated[str, typer.Option("--output", "-o", help="table, json or yaml.")]
WideOutputOpt = Annotated[str, typer.Option("--output", "-o", help="table, wide (more columns), json or yaml.")]

OUTPUTS = ("table", "json", "yaml")
UNBOUNDED = 1 << 20  # columns: a table measured without the console's width


def _width(stream: TextIO) -> int | None:
    """The terminal's width (``COLUMNS`` first, as rich reads it); piped output is not wrapped at 80
    columns — scripts and tests read it — and a wider ``COLUMNS`` widens it (a wide table is cut to
    the width)."""
    if stream.isatty():
        return None
    cols = os.environ.get("COLUMNS", "")
    return max(250, int(cols)) if cols.isdigit() else 250


def stdout() -> Console:
    return Console(width=_width(sys.stdout), highlight=False, soft_wrap=False)


def stderr() -> Console:
    return Console(stderr=True, highlight=False, width=_width(sys.stderr))


class CliError(Exception):
    """A failure to report to the user: ``code`` and ``message`` as the server gave them."""

    def __init__(self, message: str, code: str = "ERROR", status: int | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.details = details or {}

    def lines(self) -> list[str]:
        head = f"Error ({self.code}{f', HTTP {self.status}' if self.status else ''}): {self.message}"
        out = [head]
        for f in self.details.get("fields") or []:
            out.append(f"  - {f.get('field', '')}: {f.get('message', '')}")
        for c in self.details.get("causes") or []:
            out.append(f"  - {c.get('field', '')}: {c.get('message', '')}")
        return out


def fail(err: CliError) -> NoReturn:
    """Print ``err`` in red on stderr and exit 1."""
    console = stderr()
    for line in err.lines():
        console.print(line, style="red", markup=False)
    raise typer.Exit(1)


def error_from_response(resp: httpx.Response) -> CliError:
    """The server's ``{code, message, details}`` or Kubernetes ``Status`` as a CliError."""
    try:
        body = resp.json()
    except ValueError:
        return CliError(resp.text.strip() or resp.reason_phrase, f"HTTP_{resp.status_code}", resp.status_code)
    if isinstance(body, dict) and body.get("kind") == "Status":
        return CliError(str(body.get("message", "")), str(body.get("reason") or "Failure"), resp.status_code,
                        body.get("details") or {})
    if isinstance(body, dict) and "code" in body:
        return CliError(str(body.get("message", "")), str(body["code"]), resp.status_code, body.get("details") or {})
    return CliError(resp.text.strip(), f"HTTP_{resp.status_code}", resp.status_code)


@dataclass(frozen=True)
class Resource:
    """One resource type the server serves, as discovery describes it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base

    def names(self) -> set[str]:
        return {self.plural, self.singular or self.kind.lower(), self.kind.lower(), *self.short_names}


@dataclass
class ApiClient:
    """An authenticated connection to one server; every failure becomes a ``CliError``."""

    server: str = DEFAULT_SERVER
    token: str | None = None
    verify: ssl.SSLContext | bool = True
    timeout: float = 30.0
    _http: httpx.Client | None = field(default=None, repr=False)
    _resources: list[Resource] | None = field(default=None, repr=False)

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            headers = {"User-Agent": "drods-cli", "Accept": "application/json"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            self._http = httpx.Client(base_url=self.server.rstrip("/"), headers=headers,
                                      transport=transport(self.verify), timeout=self.timeout)
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def request(self, method: str, path: str, *, ok: Sequence[int] = (), **kwargs: Any) -> httpx.Response:
        """Send one request; a non-2xx answer (other than those in ``ok``) raises ``CliError``."""
        try:
            resp = self.http.request(method, path, **kwargs)
        except httpx.ConnectError as e:
            if "CERTIFICATE_VERIFY_FAILED" in str(e):  # it answered: with a certificate we do not trust
                raise CliError(f"the certificate of {self.server} is not trusted ({e}): pass --ca-file (or "
                               "DRODS_CA_FILE) with the CA that signed it — the server's DATA_DIR/tls/ca.crt, or "
                               "your own CA if it serves your certificate (--tls-cert)", "CERTIFICATE_UNTRUSTED") from e
            raise CliError(f"cannot connect to DRO-DS at {self.server}: {e}. Is the server running? "
                           "(set --server or DRODS_SERVER)", "CONNECTION_FAILED") from e
        except httpx.TimeoutException as e:
            raise CliError(f"DRO-DS at {self.server} did not answer in {self.timeout:.0f}s", "TIMEOUT") from e
        except httpx.HTTPError as e:
            raise CliError(f"request to {self.server} failed: {e}", "CONNECTION_FAILED") from e
        if resp.is_success or resp.status_code in ok:
            return resp
        err = error_from_response(resp)
        if resp.status_code == 401 and not self.token:
            err.message += " (pass --token or set DRODS_TOKEN)"
        raise err

    def get_json(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs).json()

    # ---- discovery -------------------------------------------------------------------------

    def resources(self) -> list[Resource]:
        """Every resource type from ``/api/v1`` and ``/apis``, so new kinds need no client change."""
        if self._resources is None:
            found: list[Resource] = []
            gvs = [("", "v1")]
            for g in self.get_json("/apis").get("groups", []):
                preferred = (g.get("preferredVersion") or {}).get("version")
                versions = [v["version"] for v in g.get("versions", [])]
                gvs.append((g["name"], preferred or versions[0]))
            for group, version in gvs:
                path = f"/apis/{group}/{version}" if group else f"/api/{version}"
                resp = self.request("GET", path, ok=(404,))
                if resp.status_code == 404:
                    continue
                for r in resp.json().get("resources", []):
                    if "/" in r["name"]:
                        continue  # subresources such as clusters/status
                    found.append(Resource(group, version, r["kind"], r["name"], bool(r.get("namespaced")),
                                          r.get("singularName") or "", tuple(r.get("shortNames") or ())))
            self._resources = found
        return self._resources

    def resolve(self, name: str) -> Resource:
        """``clusters``, ``cluster``, ``Cluster``, ``mc``, ``deploy``, ``deployments.apps`` → a Resource."""
        wanted, _, group = name.lower().partition(".")
        matches = [r for r in self.resources() if wanted in r.names() and (not group or r.group == group)]
        if not matches:
            raise CliError(f"the server doesn't have a resource type {name!r} (see `kubectl api-resources` "
                           "or `drods get --help`)", "RESOURCE_TYPE_NOT_FOUND")
        return matches[0]

    def resource_for(self, api_version: str, kind: str) -> Resource:
        for r in self.resources():
            if r.api_version == api_version and r.kind == kind:
                return r
        raise CliError(f"no resource {kind!r} in {api_version!r} on this server", "RESOURCE_TYPE_NOT_FOUND")


def tls_verify(ca_file: str | None, insecure: bool) -> ssl.SSLContext | bool:
    """The system's CAs plus ``--ca-file`` (else the local data dir's CA, which `drods serve` made)."""
    if insecure:
        return False
    if ca_file and not os.path.isfile(ca_file):
        raise CliError(f"CA file {ca_file} not found", "FILE_NOT_FOUND")
    return client_context(ca_file or None)


def connect(server: str, token: str | None, ca_file: str | None = None, insecure: bool = False) -> ApiClient:
    return ApiClient(server=server, token=token, verify=tls_verify(ca_file, insecure))


def check_output(output: str) -> str:
    if output not in OUTPUTS:
        raise typer.BadParameter(f"must be one of {', '.join(OUTPUTS)}", param_hint="--output")
    return output


def dump(data: Any, output: str) -> None:
    """Print ``data`` as JSON or YAML (plain, so it can be piped and parsed)."""
    if output == "json":
        typer.echo(json.dumps(data, indent=2, sort_keys=False))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), nl=False)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, show_header: bool = True) -> None:
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", show_header=show_header)
    for h in headers:
        table.add_column(h.upper(), no_wrap=True, overflow="fold")
    for row in rows:
        table.add_row(*(Text("" if c is None else str(c)) for c in row))  # text: "[aws, gcp]" is not markup
    console = stdout()
    # never cut a cell (as kubectl): as wide as the table needs, a terminal wraps the longer lines
    natural = Measurement.get(console, console.options.update_width(UNBOUNDED), table).maximum
    if natural > console.width:
        console = Console(width=natural, highlight=False, soft_wrap=False)
    with console.capture() as captured:
        console.print(table)
    typer.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def iter_documents(text: str, source: str) -> Iterator[dict[str, Any]]:
    """Objects in a multi-document YAML or JSON text; ``kind: List`` is flattened."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise CliError(f"{source}: not valid YAML/JSON: {e}", "MALFORMED_FILE") from e
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise CliError(f"{source}: every document must be a mapping", "MALFORMED_FILE")
        if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
            yield from (i for i in doc.get("items") or [] if isinstance(i, dict))
        else:
            yield doc


def non_finite_field(obj: Any, path: str = "") -> str | None:
    """The first field holding YAML's ``.nan`` or ``.inf`` (JSON, which the API reads, has neither), or None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return path or "."
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        found = non_finite_field(value, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path
                                 else str(key))
        if found is not None:
            return found
    return None


def read_sources(paths: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(source, object) for ``-f`` arguments: files, directories (``*.yaml|yml|json``) or ``-``."""
    for p in paths:
        if p == "-":
            yield from (("<stdin>", d) for d in iter_documents(sys.stdin.read(), "<stdin>"))
            continue
        if os.path.isdir(p):
            files = sorted(os.path.join(p, f) for f in os.listdir(p)
                           if f.endswith((".yaml", ".yml", ".json")) and os.path.isfile(os.path.join(p, f)))
        elif os.path.isfile(p):
            files = [p]
        else:
            raise CliError(f"{p}: no such file or directory", "FILE_NOT_FOUND")
        for f in files:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
            yield from ((f, d) for d in iter_documents(text, f))
