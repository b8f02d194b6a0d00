"""``drods cluster taint NAME KEY[=VALUE]:EFFECT … [KEY[:EFFECT]-]``: a cluster's taints, in
``kubectl taint``'s words (kubectl taints only nodes; Karmada has ``karmadactl taint``).

``KEY=VALUE:EFFECT`` adds a taint (a taint of that key and effect already there is refused unless
``--overwrite``), ``KEY:EFFECT-`` removes that one, ``KEY-`` every taint of the key. The new list is
written with the read's ``resourceVersion``, so a taint the health controller or a ClusterTaintPolicy
set meanwhile is not lost: a conflict reads again and retries. NoSchedule keeps new replicas off,
NoExecute moves what does not tolerate it (`drods.scheduler.plugins.taint_toleration`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, get_args

import typer

from drods.cli.client import cluster_app, handles_errors
from drods.cli.remote import CaFileOpt, CliError, InsecureOpt, ServerOpt, TokenOpt, connect, stdout
from drods.model.cluster import TaintEffect
from drods.model.timefmt import rfc3339

EFFECTS: tuple[str, ...] = get_args(TaintEffect)
CLUSTERS = "/apis/multicluster.io/v1alpha1/clusters"
_KEY = r"(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_VALUE = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
CONFLICT_RETRIES = 5


@dataclass(frozen=True, slots=True)
class TaintChange:
    key: str
    value: str = ""
    effect: str | None = None  # None: every effect of the key (a removal only)
    remove: bool = False


def parse_taint(spec: str) -> TaintChange:
    """``key=value:Effect`` / ``key:Effect`` (add), ``key:Effect-`` / ``key-`` (remove)."""
    remove = spec.endswith("-")
    body = spec[:-1] if remove else spec
    key_value, _, effect = body.partition(":")
    key, _, value = key_value.partition("=")
    if not re.fullmatch(_KEY, key):
        raise CliError(f"invalid taint {spec!r}: {key!r} is not a valid key (DNS-style prefix/name)", "BAD_TAINT")
    if value and not re.fullmatch(_VALUE, value):
        raise CliError(f"invalid taint {spec!r}: {value!r} is not a valid value", "BAD_TAINT")
    if effect and effect not in EFFECTS:
        raise CliError(f"invalid taint {spec!r}: effect {effect!r} is not one of {', '.join(EFFECTS)}", "BAD_TAINT")
    if not remove and not effect:
        raise CliError(f"invalid taint {spec!r}: give an effect (KEY[=VALUE]:{'|'.join(EFFECTS)}), or end it "
                       "with '-' to remove", "BAD_TAINT")
    if remove and value:
        raise CliError(f"invalid taint {spec!r}: a removal names the key and optionally the effect "
                       "(KEY:EFFECT- or KEY-), not a value", "BAD_TAINT")
    return TaintChange(key, value, effect or None, remove)


def apply_changes(taints: list[dict[str, Any]], changes: list[TaintChange], *, overwrite: bool,
                  now: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The taint list after ``changes`` and what was done, in kubectl's words. Removing a taint that is
    not there, or adding one of a key and effect already there without ``overwrite``, is a `CliError`."""
    out = [dict(t) for t in taints]
    done: list[str] = []
    for c in changes:
        if c.remove:
            kept = [t for t in out if not (t.get("key") == c.key and (c.effect is None or t.get("effect") == c.effect))]
            if len(kept) == len(out):
                raise CliError(f"taint {c.key!r}{f' with effect {c.effect!r}' if c.effect else ''} not found",
                               "NOT_FOUND")
            out = kept
            done.append(f"untainted {c.key}{f':{c.effect}' if c.effect else ''}")
            continue
        same = next((t for t in out if t.get("key") == c.key and t.get("effect") == c.effect), None)
        if same is not None and not overwrite:
            raise CliError(f"cluster already has a taint with key {c.key!r} and effect {c.effect!r} "
                           "(--overwrite to change its value)", "ALREADY_EXISTS")
        taint = {"key": c.key, **({"value": c.value} if c.value else {}), "effect": c.effect, "timeAdded": now}
        out = [t for t in out if t is not same] + [taint]
        done.append(f"tainted {c.key}{f'={c.value}' if c.value else ''}:{c.effect}")
    return out, done


@cluster_app.command("taint")
@handles_errors
def cluster_taint(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    taints: Annotated[list[str], typer.Argument(help="KEY[=VALUE]:EFFECT to add, KEY[:EFFECT]- to remove; "
                                                     f"EFFECT is one of {', '.join(EFFECTS)}.")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Change the value of a taint of the same "
                                                               "key and effect.")] = False,
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Add or remove a cluster's taints (as kubectl taint nodes does a node's): NoSchedule keeps new
    replicas off, NoExecute also moves those that do not tolerate it."""
    import time

    changes = [parse_taint(t) for t in taints]
    api = connect(server, token, ca_file, insecure)
    for _ in range(CONFLICT_RETRIES):
        obj = api.request("GET", f"{CLUSTERS}/{name}").json()
        current = list((obj.get("spec") or {}).get("taints") or [])
        new, done = apply_changes(current, changes, overwrite=overwrite, now=rfc3339(time.time()))
        body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": {"taints": new}}
        r = api.request("PATCH", f"{CLUSTERS}/{name}", json=body, ok=(409,),
                        headers={"Content-Type": "application/merge-patch+json"})
        if r.status_code != 409:
            for line in done:
                stdout().print(f"cluster/{name} {line}", markup=False)
            return
    raise CliError(f"cluster {name!r} kept changing; its taints were not written (try again)", "CONFLICT")
