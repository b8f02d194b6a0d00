"""What joining a member takes: its kubeconfig read and made self-contained, the member read through
the official Kubernetes client, the ``POST /api/v1/clusters`` body built from what it reports —
for one member (``drods cluster join NAME --kubeconfig F``) or a directory of them (``--from DIR``,
e.g. the members of ``drods sim fleet --out DIR``).

``--from DIR --pull`` registers every member in pull mode and writes ``DIR/agents.yaml`` (0600): for
each member its name, kubeconfig and a ``cluster-agent`` token bound to it, signed with the control
plane's key (``--data-dir``) and recorded in its store like ``drods token create``'s — what
``drods agent --from DIR`` runs the agents from.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drods.cli.remote import ApiClient, CliError, dump, stdout

# YAML: a fleet's directory is also its members' state directory, where *.json are their state files.
AGENTS_FILE = "agents.yaml"
FLEET_FILE = "fleet.yaml"
INSPECT_CONCURRENCY = 16
_FILE_KEYS = (("clusters", "cluster", "certificate-authority"), ("users", "user", "client-certificate"),
              ("users", "user", "client-key"))


def load_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig with referenced certificate/key files inlined as ``*-data`` (self-contained)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise CliError(f"cannot read kubeconfig {path}: {e}", "BAD_KUBECONFIG") from e
    if not isinstance(doc, dict) or not doc.get("clusters"):
        raise CliError(f"{path} is not a kubeconfig (no clusters)", "BAD_KUBECONFIG")
    for section, inner, key in _FILE_KEYS:
        for entry in doc.get(section) or []:
            body = (entry or {}).get(inner) or {}
            ref = body.get(key)
            if ref and not body.get(f"{key}-data"):
                file = Path(ref) if Path(ref).is_absolute() else path.parent / ref
                try:
                    body[f"{key}-data"] = base64.b64encode(file.read_bytes()).decode()
                except OSError as e:
                    raise CliError(f"kubeconfig {path} refers to {file}: {e}", "BAD_KUBECONFIG") from e
                del body[key]
    return doc


def server_of(doc: dict[str, Any], context: str | None) -> str:
    ctx_name = context or doc.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or []}
    if ctx_name not in contexts:
        raise CliError(f"kubeconfig has no context {ctx_name!r}", "BAD_KUBECONFIG")
    cluster_name = contexts[ctx_name].get("cluster")
    for c in doc.get("clusters") or []:
        if c.get("name") == cluster_name:
            return str((c.get("cluster") or {}).get("server") or "")
    raise CliError(f"kubeconfig context {ctx_name!r} names an unknown cluster {cluster_name!r}", "BAD_KUBECONFIG")


async def inspect_member(name: str, doc: dict[str, Any], context: str | None) -> Any:
    """The member's summary (nodes, topology, version) through the official client."""
    from drods.members.client import MemberClient, MemberError, MemberOptions, MemberUnavailable

    client = MemberClient.from_kubeconfig(name, doc, context, MemberOptions(connect_timeout=5, read_timeout=15,
                                                                             retries=1))
    try:
        summary = await client.summary()
        system = await client.get("v1", "Namespace", "kube-system")  # what the member is: one Cluster each
        uid = str(((system or {}).get("metadata") or {}).get("uid") or "") or None
        return dataclasses.replace(summary, cluster_id=uid)
    except (MemberUnavailable, MemberError) as e:
        raise CliError(f"cannot read the member cluster: {e}", "MEMBER_UNREACHABLE") from e
    finally:
        await client.close()


def member_body(name: str, doc: dict[str, Any], context: str | None, summary: Any, *, pull: bool = False,
                given: dict[str, str | None] | None = None, labels: dict[str, str] | None = None,
                capabilities: list[str] | None = None) -> dict[str, Any]:
    """The ``POST /api/v1/clusters`` body for a member read through ``summary``: topology from its
    nodes unless given; push members carry their kubeconfig, pull members nothing (their agent
    reaches the control plane, not the other way round)."""
    caps = list(capabilities or [])
    if summary.gpu_allocatable > 0 and "gpu" not in caps:
        caps.append("gpu")
    body: dict[str, Any] = {"name": name, "syncMode": "Pull" if pull else "Push", "endpoint": server_of(doc, context)}
    if getattr(summary, "cluster_id", None):
        body["id"] = summary.cluster_id
    if not pull:
        body["credentials"] = {"kubeconfig": yaml.safe_dump(doc, sort_keys=False)}
        if context:
            body["credentials"]["context"] = context
    given = given or {}
    for key, found in (("region", summary.region), ("zone", (summary.zones or [None])[0]),
                       ("provider", summary.provider), ("city", summary.city)):
        if given.get(key) or found:
            body[key] = given.get(key) or found
    if labels:
        body["labels"] = labels
    if caps:
        body["capabilities"] = caps
    if summary.gpu_models:
        body["gpuModels"] = summary.gpu_models
    return body



@dataclass(frozen=True)
class DirectoryMember:
    name: str
    kubeconfig: Path


def directory_members(root: Path) -> list[DirectoryMember]:
    """The members ``root`` lists in ``fleet.yaml`` (a running ``drods sim fleet``), else one per
    ``root/NAME/kubeconfig``."""
    manifest = root / FLEET_FILE
    if manifest.exists():
        try:
            doc = yaml.safe_load(manifest.read_text())
            found = [DirectoryMember(str(m["name"]), Path(m["kubeconfig"])) for m in doc["members"]]
        except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
            raise CliError(f"cannot read {manifest}: {e}", "BAD_FLEET") from e
    else:
        found = [DirectoryMember(p.parent.name, p) for p in sorted(root.glob("*/kubeconfig"))]
    if not found:
        raise CliError(f"{root} holds no members: no {FLEET_FILE} and no NAME/kubeconfig (is the fleet "
                       "still starting?)", "BAD_FLEET")
    return found


async def _inspect_all(members: list[DirectoryMember]) -> list[tuple[dict[str, Any], Any] | CliError]:
    """Each member's (kubeconfig, summary), or the error that stopped it; a few at a time."""
    gate = asyncio.Semaphore(INSPECT_CONCURRENCY)

    async def one(m: DirectoryMember) -> tuple[dict[str, Any], Any] | CliError:
        async with gate:
            try:
                doc = load_kubeconfig(m.kubeconfig)
                return doc, await inspect_member(m.name, doc, None)
            except CliError as e:
                return e

    return list(await asyncio.gather(*(one(m) for m in members)))


def join_directory(root: Path, api: ApiClient, *, pull: bool, labels: dict[str, str] | None,
                   capabilities: list[str] | None, minter: tuple[Path, str | None], server: str,
                   output: str) -> None:
    """Join every member of ``root``; one that cannot be read or registered is reported and the
    others still join (exit status 1 at the end). A member already registered is left as it is."""
    members = directory_members(root)
    known = {c.get("name") for c in api.get_json("/api/v1/clusters").get("items") or []}
    inspected = asyncio.run(_inspect_all([m for m in members if m.name not in known]))
    results: list[dict[str, Any]] = []
    todo = iter(inspected)
    for m in members:
        outcome = "exists" if m.name in known else _register(api, m.name, next(todo), pull, labels, capabilities)
        results.append({"name": m.name, "result": outcome})
    failed = [r for r in results if r["result"] not in ("joined", "exists")]
    if pull:
        joined = [m for m, r in zip(members, results, strict=True) if r["result"] in ("joined", "exists")]
        _write_agents(root, joined, minter, server, fresh={r["name"] for r in results if r["result"] == "joined"})
    if output != "table":
        dump({"members": results}, output)
    else:
        for r in results:
            stdout().print(f"cluster/{r['name']} {r['result']}", markup=False)
        stdout().print(f"{sum(r['result'] == 'joined' for r in results)} joined, "
                       f"{sum(r['result'] == 'exists' for r in results)} already there, {len(failed)} failed"
                       + (f"; agents: drods agent --from {root}" if pull else ""), markup=False)
    if failed:
        raise CliError(f"{len(failed)} member(s) of {root} not joined: "
                       + "; ".join(f"{r['name']}: {r['result']}" for r in failed), "JOIN_FAILED")


def _register(api: ApiClient, name: str, inspected: tuple[dict[str, Any], Any] | CliError, pull: bool,
              labels: dict[str, str] | None, capabilities: list[str] | None) -> str:
    """``joined``, or why not."""
    if isinstance(inspected, CliError):
        return inspected.message
    doc, summary = inspected
    try:
        api.request("POST", "/api/v1/clusters",
                    json=member_body(name, doc, None, summary, pull=pull, labels=labels, capabilities=capabilities))
    except CliError as e:
        return f"{e.code}: {e.message}"
    return "joined"


def _write_agents(root: Path, members: list[DirectoryMember], minter: tuple[Path, str | None], server: str, *,
                  fresh: set[str] | frozenset[str] = frozenset()) -> None:
    """``root/agents.yaml``: a cluster-agent token per pull member, for ``drods agent --from``. A member the
    file already gives a token for the same server keeps it: a join run again mints none (each run had
    minted a fresh, never-expiring token per member and left the old ones valid). The ``fresh`` ones, just
    registered, get a new one all the same: a Cluster deleted and joined again had its tokens revoked with
    it, and the file's would be refused forever. Delete the file for new ones (and revoke the old with
    `drods token revoke`)."""
    from drods.api.auth import Role
    from drods.cli.agents import read_agents_file
    from drods.cli.tokens import mint

    data_dir, store = minter
    path = root / AGENTS_FILE
    kept: dict[str, str] = {}
    if path.exists():
        try:
            written, entries = read_agents_file(path)
        except ValueError:
            written, entries = "", []
        if written == server:
            kept = {e["cluster"]: e["token"] for e in entries if e["cluster"] not in fresh}
    agents = [{"cluster": m.name, "kubeconfig": str(m.kubeconfig),
               "token": kept.get(m.name) or mint(data_dir, store, Role.CLUSTER_AGENT, subject=f"agent:{m.name}",
                                                 cluster=m.name, ttl_seconds=None)} for m in members]
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump({"server": server, "agents": agents}, out, sort_keys=False)
    os.replace(tmp, path)
