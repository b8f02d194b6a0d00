"""ClusterOverridePolicy (API4): per-cluster changes to the copy sent to one member.

Matching: a policy applies to a resource when one of its ``resourceSelectors`` matches (none =
every resource; a namespaced Karmada OverridePolicy only ever applies in its namespace); a rule
applies to a cluster when its ``clusterSelector`` matches (``names``, ``labelSelector`` and
``fieldSelector`` on the cluster's provider / region / zone / city, all that are given; neither =
every cluster) and the cluster is not in ``exclude``. Policies apply in name order, rules in their
order, and within a rule: ``fieldPatches``, then the Karmada-style ``imageOverrider``,
``commandOverrider``, ``argsOverrider``, ``labelsOverrider``, ``annotationsOverrider``,
``fieldOverrider`` (`drods.controllers.field_overrider`), and last Karmada's ``plaintext`` (RFC 6902:
a ``replace`` or ``remove`` of a path that is not there, or an ``add`` under one, fails the override).

Field patch paths use dots and ``[i]`` indexes (``spec.template.spec.containers[0].resources.limits``);
a key that contains dots goes in brackets (``metadata.labels[app.kubernetes.io/name]``), and a path
starting with ``/`` is a JSON pointer (RFC 6901). Ops:

* ``replace`` — set the value (missing maps on the way are created; a list index must exist);
* ``add`` — set a map key, or insert into a list at the index (``[-]`` or the length appends);
* ``remove`` — delete the key or list item (absent = nothing to do);
* ``merge`` — RFC 7386 merge patch of the value into what is at the path.

Image overriders split an image into ``[registry/]repository[:tag|@digest]`` (the registry is the
first path component when it has a ``.`` or ``:`` or is ``localhost``). ``replace`` sets the
component, ``remove`` clears it (registry or tag; the repository can't be removed), ``add`` appends
the value to it (Karmada's semantics: registry ``docker.io`` + ``-mirror`` → ``docker.io-mirror``;
an empty registry becomes the value). ``container`` limits it to one container by name.
Command/args overriders ``add`` values at the end or ``remove`` every occurrence; label/annotation
overriders ``add`` (set), ``replace`` (only keys that exist) or ``remove`` keys.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any

import jsonpatch
import jsonpointer

from drods.controllers.field_overrider import FieldOverrideError, apply_field_overrider
from drods.model.policy import (
    IDENTITY_MESSAGE,
    ClusterOverridePolicySpec,
    CommandArgsOverrider,
    FieldPatch,
    ImageOverrider,
    MapOverrider,
    OverrideClusterSelector,
    PlaintextPatch,
    ResourceSelector,
)
from drods.registry.patch import merge_patch, pointer_failure

Obj = dict[str, Any]
Token = str | int

_TOKEN = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")


class OverrideError(ValueError):
    """An override that can't be applied to this object (bad path, wrong type, missing index)."""


def parse_path(path: str) -> list[Token]:
    """``a.b[0].c`` / ``a.b[x.y]`` / ``/a/b/0`` → ``["a", "b", 0, "c"]``."""
    if path.startswith("/"):
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]
        return [int(p) if p.isdigit() else p for p in parts]
    tokens: list[Token] = []
    pos = 0
    while pos < len(path):
        if path[pos] == ".":
            pos += 1
            continue
        m = _TOKEN.match(path, pos)
        if m is None:
            raise OverrideError(f"path {path!r}: cannot parse at position {pos}")
        if m.group(1) is not None:
            tokens.append(m.group(1))
        else:
            inner = m.group(2)
            tokens.append(int(inner) if inner.isdigit() else inner)
        pos = m.end()
    if not tokens:
        raise OverrideError(f"path {path!r} is empty")
    return tokens


def _index(seq: list[Any], tok: Token, path: str, *, insert: bool = False) -> int:
    if tok == "-":
        return len(seq)
    if not isinstance(tok, int):
        raise OverrideError(f"path {path!r}: {tok!r} indexes a list but is not a number")
    limit = len(seq) if insert else len(seq) - 1
    if tok > limit:
        raise OverrideError(f"path {path!r}: index {tok} is out of range (length {len(seq)})")
    return tok


def _parent(obj: Obj, tokens: list[Token], path: str, create: bool) -> Any:
    cur: Any = obj
    for i, tok in enumerate(tokens[:-1]):
        nxt = tokens[i + 1]
        if isinstance(cur, list):
            cur = cur[_index(cur, tok, path)]
            continue
        if not isinstance(cur, dict):
            raise OverrideError(f"path {path!r}: {tokens[i - 1] if i else 'the object'} is not a map or list")
        key = str(tok)
        if key not in cur or cur[key] is None:
            if not create:
                return None
            cur[key] = [] if isinstance(nxt, int) else {}
        cur = cur[key]
    return cur


def apply_field_patch(obj: Obj, patch: FieldPatch) -> None:
    tokens = parse_path(patch.path)
    parent = _parent(obj, tokens, patch.path, create=patch.op != "remove")
    last = tokens[-1]
    if parent is None:
        return  # remove of something that isn't there
    if isinstance(parent, list):
        if patch.op == "remove":
            if isinstance(last, int) and last < len(parent):
                parent.pop(last)
            return
        if patch.op == "add":
            parent.insert(_index(parent, last, patch.path, insert=True), copy.deepcopy(patch.value))
            return
        i = _index(parent, last, patch.path)
        parent[i] = (merge_patch(parent[i], patch.value) if patch.op == "merge" else copy.deepcopy(patch.value))
        return
    if not isinstance(parent, dict):
        raise OverrideError(f"path {patch.path!r}: the parent is not a map or list")
    key = str(last)
    if patch.op == "remove":
        parent.pop(key, None)
    elif patch.op == "merge":
        parent[key] = merge_patch(parent.get(key), patch.value)
    else:
        parent[key] = copy.deepcopy(patch.value)


# ---- Karmada-style overriders ------------------------------------------------------------------

def apply_plaintext(obj: Obj, patch: PlaintextPatch) -> None:
    """One RFC 6902 operation, as Karmada applies its ``plaintext`` overrider: a path that is not there
    fails the override (the copy is not sent) instead of being skipped or made."""
    op: Obj = {"op": patch.operator, "path": patch.path}
    if patch.operator != "remove":
        op["value"] = copy.deepcopy(patch.value)
    try:
        jsonpatch.apply_patch(obj, [op], in_place=True)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
        raise OverrideError(f"plaintext {patch.operator} {patch.path}: {pointer_failure(e)}") from e



def pod_spec(obj: Obj) -> Obj | None:
    """Where the containers are: a Pod's spec, a workload's pod template, a CronJob's job template."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    kind = obj.get("kind")
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    tmpl = spec.get("template")
    if isinstance(tmpl, dict) and isinstance(tmpl.get("spec"), dict):
        return tmpl["spec"]  # type: ignore[no-any-return]
    return None


def containers(obj: Obj, *, init: bool = True) -> Iterable[Obj]:
    ps = pod_spec(obj)
    if ps is None:
        return []
    out = [c for c in ps.get("containers") or [] if isinstance(c, dict)]
    if init:
        out += [c for c in ps.get("initContainers") or [] if isinstance(c, dict)]
    return out


def split_image(image: str) -> tuple[str, str, str]:
    """``registry/repo:tag`` → (registry, repository, tag-or-digest-with-its-separator)."""
    rest = image
    registry = ""
    first, sep, after = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        registry, rest = first, after
    suffix = ""
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        suffix = "@" + digest
    elif ":" in rest.rsplit("/", 1)[-1]:
        rest, tag = rest.rsplit(":", 1)
        suffix = ":" + tag
    return registry, rest, suffix


def join_image(registry: str, repository: str, suffix: str) -> str:
    return f"{registry}/{repository}{suffix}" if registry else f"{repository}{suffix}"


def override_image(image: str, o: ImageOverrider) -> str:
    registry, repo, suffix = split_image(image)
    if o.component == "Registry":
        registry = {"replace": o.value, "remove": "", "add": registry + o.value}[o.operator]
    elif o.component == "Repository":
        if o.operator == "remove":
            raise OverrideError("the image repository cannot be removed")
        repo = o.value if o.operator == "replace" else repo + o.value
    else:
        sep = "@" if suffix.startswith("@") or o.value.startswith("sha256:") else ":"
        current = suffix[1:]
        value = {"replace": o.value, "remove": "", "add": current + o.value}[o.operator]
        suffix = f"{sep}{value}" if value else ""
    return join_image(registry, repo, suffix)


def _command_args(obj: Obj, field: str, o: CommandArgsOverrider) -> None:
    for c in containers(obj, init=False):
        if c.get("name") != o.containerName:
            continue
        values = list(c.get(field) or [])
        if o.operator == "add":
            values += o.value
        else:
            values = [v for v in values if v not in o.value]
        c[field] = values


def _map(obj: Obj, field: str, o: MapOverrider) -> None:
    meta = obj.setdefault("metadata", {})
    current: dict[str, str] = dict(meta.get(field) or {})
    for k, v in o.value.items():
        if o.operator == "add":
            current[k] = v
        elif o.operator == "replace":
            if k in current:
                current[k] = v
        else:
            current.pop(k, None)
    meta[field] = current


def _image_at(obj: Obj, pointer: str) -> str:
    """The image string an image overrider's ``predicate`` names."""
    cur: Any = obj
    for part in pointer.lstrip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            raise OverrideError(f"imageOverrider predicate {pointer}: no such field")
    if not isinstance(cur, str):
        raise OverrideError(f"imageOverrider predicate {pointer}: not an image string")
    return cur


# ---- matching ----------------------------------------------------------------------------------


def resource_matches(sel: ResourceSelector, obj: Obj) -> bool:
    meta = obj.get("metadata") or {}
    if sel.apiVersion and sel.apiVersion != obj.get("apiVersion"):
        return False
    if sel.kind != obj.get("kind"):
        return False
    if sel.name and sel.name != meta.get("name"):
        return False
    if sel.namespace and sel.namespace != meta.get("namespace"):
        return False
    return sel.labelSelector is None or sel.labelSelector.matches(meta.get("labels") or {})


def cluster_matches(sel: OverrideClusterSelector, cluster: str, labels: dict[str, str],
                    fields: Mapping[str, str] | None = None) -> bool:
    """``fields`` are the cluster's provider / region / zone / city (`fieldSelector`)."""
    if (sel.names and cluster not in sel.names) or cluster in sel.exclude:
        return False
    if sel.fieldSelector is not None:
        for e in sel.fieldSelector.matchExpressions:
            if ((fields or {}).get(e.key) in e.values) != (e.operator == "In"):
                return False
    return sel.labelSelector is None or sel.labelSelector.matches(labels)


def policy_applies(spec: ClusterOverridePolicySpec, obj: Obj, name: str = "") -> bool:
    """``name`` ``namespace/name`` is a namespaced policy: only its namespace's objects."""
    ns, slash, _ = name.rpartition("/")
    if slash and ((obj.get("metadata") or {}).get("namespace") or "") != ns:
        return False
    selectors = spec.selectors()
    return not selectors or any(resource_matches(s, obj) for s in selectors)


def implicit_priority(spec: ClusterOverridePolicySpec, obj: Obj) -> int:
    """How specifically a policy selects ``obj``, as Karmada ranks it: 3 by name, 2 by label selector,
    1 by kind alone or with no selector at all. The more specific policy is applied later, so it wins."""
    matched = [s for s in spec.selectors() if resource_matches(s, obj)]
    return max((3 if s.name else 2 if s.labelSelector is not None else 1 for s in matched), default=1)


def apply_overrides(obj: Obj, cluster: str, cluster_labels: dict[str, str],
                    policies: Iterable[tuple[str, ClusterOverridePolicySpec]],
                    cluster_fields: Mapping[str, str] | None = None) -> list[str]:
    """Change ``obj`` (a member copy) in place; returns the names of the policies that changed it.

    ``policies`` are (name, spec) pairs; cluster-wide ones are applied first, then the namespaced ones
    (named ``namespace/name``), so a namespaced policy has the last word; within each, the least
    specific first (`implicit_priority`), then by name — Karmada's order. Raises `OverrideError`."""
    applied: list[str] = []
    chosen = [(name, spec) for name, spec in policies if policy_applies(spec, obj, name)]
    identity = _identity(obj)
    for name, spec in sorted(chosen, key=lambda p: ("/" in p[0], implicit_priority(p[1], obj), p[0])):
        used = False
        for rule in spec.overrides:
            if not cluster_matches(rule.clusterSelector, cluster, cluster_labels, cluster_fields):
                continue
            used = True
            try:
                for fp in rule.fieldPatches:
                    apply_field_patch(obj, fp)
                for io in rule.imageOverrider:
                    if io.predicate is not None:
                        apply_field_patch(obj, FieldPatch(path=io.predicate.path, op="replace",
                                                          value=override_image(_image_at(obj, io.predicate.path), io)))
                        continue
                    for c in containers(obj):
                        if io.container and c.get("name") != io.container:
                            continue
                        if isinstance(c.get("image"), str):
                            c["image"] = override_image(c["image"], io)
                for co in rule.commandOverrider:
                    _command_args(obj, "command", co)
                for ao in rule.argsOverrider:
                    _command_args(obj, "args", ao)
                for lo in rule.labelsOverrider:
                    _map(obj, "labels", lo)
                for an in rule.annotationsOverrider:
                    _map(obj, "annotations", an)
                for fo in rule.fieldOverrider:
                    apply_field_overrider(obj, fo)
                for pt in rule.plaintext:
                    apply_plaintext(obj, pt)
                if _identity(obj) != identity:
                    raise OverrideError(f"{IDENTITY_MESSAGE} (it would be {_shown(_identity(obj))}, not "
                                        f"{_shown(identity)})")
            except (OverrideError, FieldOverrideError) as e:
                kind = "OverridePolicy" if "/" in name else "ClusterOverridePolicy"  # namespaced: "ns/name"
                raise OverrideError(f"{kind} {name}: {e}") from e
        if used:
            applied.append(name)
    return applied


def _identity(obj: Obj) -> tuple[Any, Any, Any, Any]:
    """What the member copy is — what its Work manages (an override changes anything else)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("namespace"), meta.get("name")


def _shown(identity: tuple[Any, Any, Any, Any]) -> str:
    api_version, kind, namespace, name = identity
    return f"{api_version} {kind} {f'{namespace}/' if namespace else ''}{name}"
