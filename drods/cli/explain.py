"""``drods explain KIND/NAME [-n NS]`` and ``drods explain cluster NAME`` (X1), read from
``GET /api/v1/decisions`` and the binding's status.

A workload: its current placement, then the latest decision of each type (placement, reschedule,
eviction, rebalance, scaling, route, migration, cache plan) — trigger, inputs, the options with their
per-plugin scores, why the runner-up lost — like ``kubectl describe``; ``--history`` lists every
kept decision instead. A cluster: its state, the workloads placed there, for the workloads whose
latest placement left it out why, and the latest of the descheduler's decisions about it (an
evacuation or pre-allocation is an eviction, a restore a rebalance) with the water levels it saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from drods.cli.remote import (
    ApiClient,
    CaFileOpt,
    CliError,
    InsecureOpt,
    OutputOpt,
    ServerOpt,
    TokenOpt,
    check_output,
    connect,
    dump,
    fail,
    print_table,
    stdout,
)

PLACING = ("Placement", "Reschedule", "Eviction", "Rebalance")
_ALIASES = {"deploy": "Deployment", "deployment": "Deployment", "sts": "StatefulSet", "statefulset": "StatefulSet",
            "job": "Job", "daemonset": "DaemonSet", "ds": "DaemonSet", "binding": "Binding",
            "serviceregistration": "ServiceRegistration", "svcreg": "ServiceRegistration"}


def _say(text: str) -> None:
    stdout().print(text, markup=False, highlight=False)


def _kind_of(word: str) -> str:
    """The kind a word names as kubectl reads it: kind, plural, singular or short name, any case."""
    from drods.model.kinds import ALL_KINDS

    w = word.lower()
    if w in _ALIASES:
        return _ALIASES[w]
    # kubectl's resource.group and resource.version.group forms (deployments.apps, deployments.v1.apps)
    w, _, group = w.partition(".")
    known = next((k for k in ALL_KINDS if w in (k.kind.lower(), k.plural, k.singular, *k.short_names)
                  and (not group or group in (k.group, f"{k.version}.{k.group}"))), None)
    return known.kind if known is not None else word[:1].upper() + word[1:]


def _binding_id(kind: str, namespace: str, name: str) -> str:
    from drods.model.detection import binding_name

    if kind == "Binding":
        return name
    return binding_name(kind, _binding_namespace(kind, namespace), name)


def _binding_namespace(kind: str, namespace: str) -> str:
    """The namespace a workload's Binding names it by (none for a cluster-scoped kind)."""
    from drods.model.kinds import TEMPLATE_KINDS

    return "" if any(k.kind == kind and not k.namespaced for k in TEMPLATE_KINDS) else namespace


def _decisions(api: ApiClient, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    body = api.request("GET", "/api/v1/decisions", params={"limit": 1000, "since": "30d", **params}).json()
    return list(body["items"])


@dataclass(frozen=True, slots=True)
class BindingRead:
    """A Binding's status as this token reads it: a token limited to namespaces reads no Binding
    (Bindings are cluster-scoped), and then only the decisions say where the workload runs."""

    status: dict[str, Any] | None  # None: not readable

    def as_json(self) -> dict[str, Any]:
        return self.status if self.status is not None else {"readable": False}


def _binding(api: ApiClient, binding_id: str, subject: tuple[str, str, str] | None = None) -> BindingRead | None:
    """The Binding's status (None: no such Binding). With ``subject`` (kind, namespace, name: the id was
    derived from it) a Binding under that name that places another object is none (names collide across
    namespaces: `drods.model.detection.binding_is_for`)."""
    from drods.model.detection import binding_is_for

    r = api.request("GET", f"/api/v1/bindings/{binding_id}/status", ok=(403, 404))
    if r.status_code == 404 or (subject is not None and r.status_code == 200
                                and not binding_is_for({"spec": {"resource": r.json().get("resource")}}, *subject)):
        return None
    return BindingRead(None if r.status_code == 403 else dict(r.json()))


def _num(x: Any) -> str:
    return "" if x is None else f"{x:.1f}" if isinstance(x, float) else str(x)


def _options_table(record: Mapping[str, Any]) -> None:
    options = record.get("options") or []
    if not options:
        return
    plugins = list(dict.fromkeys(p for o in options for p in (o.get("scores") or {})))
    rows = [[o["name"], "yes" if o.get("chosen") else "no" if o.get("feasible", True) else "filtered",
             _num(o.get("replicas")), _num(o.get("total")), *(_num((o.get("scores") or {}).get(p)) for p in plugins),
             "" if o.get("chosen") else o.get("reason") or ""] for o in options]
    print_table(["option", "chosen", "replicas", "total", *plugins, "why not"], rows)
    omitted = record.get("optionsOmitted") or 0
    if omitted:
        _say(f"  … and {omitted} more feasible options not named (top {record.get('optionsTopK')} shown)")


def _inputs_line(inputs: Mapping[str, Any]) -> str:
    parts: list[str] = []
    adj = inputs.get("adjuster") or {}
    if adj.get("fleetWaterLevel") is not None and adj.get("mode") is not None:  # none: no division ran
        parts.append(f"fleet water level {adj['fleetWaterLevel'] * 100:.0f}%, adjuster {adj['mode']} "
                     f"(spread {adj.get('spread')})")
    if inputs.get("division"):
        parts.append(f"division {inputs['division']}")
    cand = inputs.get("candidates") or {}
    if "belowLimit" in cand:
        parts.append(f"{cand['belowLimit']} other active cluster(s) below their limit")
    elif cand:
        parts.append(f"{cand.get('feasible')}/{cand.get('total')} clusters feasible")
    for m in inputs.get("metrics") or []:
        target = f" (target {m['target']})" if m.get("target") is not None else ""
        value = m.get("value")
        shown = f"{value:.4g}" if isinstance(value, float) else value  # it printed cpu 133.33333333333334
        parts.append(f"{m.get('name')} {shown}{target}")
    if inputs.get("bounds"):
        parts.append(f"bounds {inputs['bounds']}")
    if isinstance(users := inputs.get("users"), Mapping):
        parts.append(_users_text(users))
    if isinstance(levels := inputs.get("waterLevels"), Mapping):
        parts.append(_water_levels_text(levels))
    if isinstance(lat := inputs.get("latencies"), Mapping):
        parts.append("measured delay " + ", ".join(f"{k} {v:g} ms" if isinstance(v, (int, float)) else f"{k} unknown"
                                                   for k, v in lat.items()))
    named = [k for k in inputs if k not in ("adjuster", "candidates", "metrics", "bounds", "weights", "filters",
                                            "analysis", "users", "waterLevels", "latencies", "division")]
    parts += [f"{k}: {_flat(inputs[k])}" for k in named]
    return "; ".join(parts)


def _flat(value: Any, prefix: str = "") -> str:
    """A nested input as text: ``cpu.used 500m, pods 4`` (not a Python dict's repr)."""
    if isinstance(value, Mapping):
        return ", ".join(_flat(v, f"{prefix}{k}.") for k, v in value.items()) or f"{prefix.rstrip('.')} -"
    if isinstance(value, list):
        value = ", ".join(_flat(v) for v in value)
    return f"{prefix.rstrip('.')} {value}".strip()


def _trigger(trig: Mapping[str, Any]) -> str:
    """Why a decision was taken: its reason, else its kind (a reschedule asked for without a reason)."""
    return str(trig.get("reason") or trig.get("kind") or "")


def _pct(x: Any) -> str:
    return f"{x * 100:.0f}%" if isinstance(x, (int, float)) else "unknown"


def _water_levels_text(levels: Mapping[str, Any]) -> str:
    """Each cluster the descheduler looked at: its water level against its limit."""
    return "water levels " + ", ".join(f"{c} {_pct(v.get('waterLevel'))} (limit {_pct(v.get('limit'))})"
                                       for c, v in levels.items())


def _place(site: Mapping[str, Any]) -> str:
    """A users' place entry's place (its site, city or region)."""
    return next((str(v) for k, v in site.items() if k != "weight"), "?")


def _users_text(users: Mapping[str, Any]) -> str:
    """Where the users are (and how that is known) and the latency from them to each chosen cluster."""
    sites = ", ".join(f"{_place(site)} {float(site.get('weight', 0)) * 100:.0f}%" for site in users.get("sites") or [])
    text = f"users ({users.get('source', 'unknown')}): {sites or 'none'}"
    if users.get("latencySLOMs") is not None:
        text += f", SLO {users['latencySLOMs']} ms"
    latency, nearest = users.get("latencyMs") or {}, users.get("latencyFrom") or {}
    if latency:
        text += "; latency " + ", ".join(
            (f"{c} {ms:.0f} ms" + (f" from {nearest[c]}" if len(users.get("sites") or []) > 1 and c in nearest else ""))
            if isinstance(ms, (int, float)) else f"{c} unknown" for c, ms in latency.items())
    unknown = [_place(site) for site in users.get("unknownPlaces") or []]
    if unknown:
        text += f"; no latency known from {', '.join(unknown)} to any cluster (weighed as neutral)"
    return text


def describe_decision(record: Mapping[str, Any]) -> None:
    """One decision, ``kubectl describe`` style."""
    trig = record.get("trigger") or {}
    _say(f"{record.get('type')} at {record.get('time')} — trigger {_trigger(trig) or '-'}")
    _say(f"  {record.get('summary')}")
    line = _inputs_line(record.get("inputs") or {})
    if line:
        _say(f"  inputs: {line}")
    _options_table(record)
    ru = record.get("runnerUp")
    if ru:
        _say(f"  runner-up: {ru['why']}")


def _placement_line(read: BindingRead | None) -> str:
    if read is None:
        return "no binding (not placed by DRO-DS)"
    status = read.status
    if status is None:
        return "not readable with this token (Bindings are cluster-scoped): the latest placement decision says where"
    shown = ", ".join(f"{p['cluster']} {p.get('replicas', '')}".strip() for p in status.get("placement") or [])
    return f"{shown or 'nowhere'} (phase {status.get('phase')}, {status.get('placed')}/{status.get('requested')})"


# A plan's decisions are about what it moves (its workload, its Dataset), of one type, this plan's.
_PLANS = {"migrationplan": ("migrationplans", "Migration"), "cacheplan": ("cacheplans", "CachePlan")}


def _plan_of(record: Mapping[str, Any]) -> str | None:
    return (((record.get("inputs") or {}).get("migration") or {}).get("plan")
            or (record.get("source") or {}).get("cachePlan"))


def _explain_plan(api: ApiClient, word: str, namespace: str, name: str, history: bool, output: str) -> None:
    """A MigrationPlan's or CachePlan's decisions: the options it weighed and why the runner-up lost."""
    plural, dtype = _PLANS[word]
    r = api.request("GET", f"/apis/multicluster.io/v1alpha1/namespaces/{namespace}/{plural}/{name}", ok=(404,))
    if r.status_code == 404:
        raise CliError(f"{word} {namespace}/{name} not found")
    plan = r.json()
    spec, status = plan.get("spec") or {}, plan.get("status") or {}
    subject = ((spec.get("workloadRef") or {}).get("kind") or "StatefulSet", str(spec["workloadRef"]["name"])) \
        if dtype == "Migration" else ("Dataset", str(spec.get("dataset")))
    items = [d for d in _decisions(api, {"kind": subject[0], "namespace": namespace, "name": subject[1],
                                         "type": dtype}) if _plan_of(d) == f"{namespace}/{name}"]
    if output != "table":
        dump({"plan": {"kind": plan.get("kind"), "namespace": namespace, "name": name, "phase": status.get("phase")},
              "subject": {"kind": subject[0], "namespace": namespace, "name": subject[1]},
              **({"history": items} if history else {"latest": items[:1]})}, output)
        return
    _say(f"Name:       {name}\nNamespace:  {namespace}\nKind:       {plan.get('kind')}")
    _say(f"Subject:    {subject[0]}/{subject[1]}\nPhase:      {status.get('phase') or 'Pending'}")
    if not items:
        _say("No decision kept for this plan.")
    for record in items if history else items[:1]:
        _say("")
        describe_decision(record)


def _registration_binding(api: ApiClient, namespace: str, name: str) -> str | None:
    """The Binding a ServiceRegistration's steered workload is placed by (``status.binding``, which
    the steering controller writes; None: not read, or not placed yet). A ServiceRegistration has no
    Binding of its own: the name derived from it found none ("no binding (not placed by DRO-DS)")."""
    r = api.request("GET", f"/apis/multicluster.io/v1alpha1/namespaces/{namespace}/serviceregistrations/{name}",
                    ok=(403, 404))
    if r.status_code != 200:
        return None
    binding = (r.json().get("status") or {}).get("binding")
    return str(binding) if isinstance(binding, str) and binding else None


def _scaled_workload(api: ApiClient, kind: str, namespace: str, name: str) -> tuple[str, str] | None:
    """The workload a FederatedHPA or CronFederatedHPA scales (kind, name), through a CronFederatedHPA's
    FederatedHPA to its target; None when it cannot be read. Scaling decisions are kept under the workload,
    so the autoscaler's own name had found "no binding and no decision recorded"."""
    from drods.model.kinds import CRON_FEDERATED_HPA, FEDERATED_HPA

    for _ in range(2):  # a CronFederatedHPA may scale a FederatedHPA, which scales the workload
        k = FEDERATED_HPA if kind == "FederatedHPA" else CRON_FEDERATED_HPA
        r = api.request("GET", f"/apis/{k.api_version}/namespaces/{namespace}/{k.plural}/{name}", ok=(403, 404))
        if r.status_code != 200:
            return None
        ref = (r.json().get("spec") or {}).get("scaleTargetRef") or {}
        if not ref.get("kind") or not ref.get("name"):
            return None
        kind, name = str(ref["kind"]), str(ref["name"])
        if kind != "FederatedHPA":
            return kind, name
    return None


def _explain_workload(api: ApiClient, kind: str, namespace: str, name: str, history: bool, output: str) -> None:
    from drods.model.decision import latest_per_type

    if kind in ("FederatedHPA", "CronFederatedHPA") and (target := _scaled_workload(api, kind, namespace, name)):
        if output == "table":
            _say(f"{kind} {namespace}/{name} scales {target[0]}/{target[1]}: its decisions are the workload's")
        kind, name = target

    binding_id = name if kind == "Binding" else _binding_id(kind, namespace, name)
    # the Binding named after the workload: only if it places this workload (`_binding`)
    derived: tuple[str, str, str] | None = None if kind == "Binding" else \
        (kind, _binding_namespace(kind, namespace), name)
    if kind == "Binding":  # its decisions are kept under the workload it places (a Binding of none: its own)
        r = api.request("GET", f"/apis/multicluster.io/v1alpha1/bindings/{name}", ok=(404,))
        if r.status_code == 404:
            raise CliError(f"binding {name!r} not found")
        ref = (r.json().get("spec") or {}).get("resource") or {}
        if ref.get("kind") and ref.get("name"):
            kind, namespace, name = str(ref["kind"]), str(ref.get("namespace") or ""), str(ref["name"])
        else:
            namespace = namespace or "default"
    if kind == "ServiceRegistration":  # it places nothing: the Binding of the workload it steers, per its status
        registered = _registration_binding(api, namespace, name)
        binding_id, derived = (registered, None) if registered else (binding_id, derived)
    status = _binding(api, binding_id, derived)
    items = _decisions(api, {"kind": kind, "namespace": namespace, "name": name})
    if status is None:  # a Binding written by hand for the workload has its own name: its decisions say it
        written = next((b for d in items if (b := (d.get("source") or {}).get("binding"))), None)
        status = _binding(api, str(written)) if written else None
    if (status is None or status.status is None) and not items:
        raise CliError(f"{kind} {namespace}/{name}: no binding and no decision recorded (is the name right?)",
                       "NOT_FOUND")
    latest = latest_per_type(items)
    if output != "table":
        body = {"subject": {"kind": kind, "namespace": namespace, "name": name},
                "placement": status.as_json() if status else None,
                **({"history": items} if history else {"latest": latest})}
        dump(body, output)
        return
    scoped = _binding_namespace(kind, namespace)  # a cluster-scoped kind has none (kubectl describe shows none)
    _say(f"Name:       {name}\n" + (f"Namespace:  {scoped}\n" if scoped else "") + f"Kind:       {kind}")
    _say(f"Placement:  {_placement_line(status)}")
    if history:
        _say("History:")
        rows = [[r.get("time"), r.get("type"), _trigger(r.get("trigger") or {}), r.get("summary")] for r in items]
        print_table(["time", "type", "trigger", "summary"], rows)
        return
    if not latest:
        _say("No decision kept (placements are kept 1 hour, scaling 7 days, routes 1 day).")
    for record in _newest_first(latest.values()):
        _say("")  # the latest of each type, newest first as --history lists them
        describe_decision(record)


def _newest_first(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(records, key=lambda r: str(r.get("time") or ""), reverse=True)


def _cluster_rows(name: str, bindings: Sequence[Mapping[str, Any]],
                  items: Sequence[Mapping[str, Any]]) -> tuple[list[list[Any]], list[list[Any]]]:
    """Workloads placed on ``name``, and those whose latest placement decision left it out (why)."""
    here = [[b["name"], next(p.get("replicas") for p in (b.get("status") or {}).get("placement") or []
                             if p.get("cluster") == name)]
            for b in bindings if any(p.get("cluster") == name for p in (b.get("status") or {}).get("placement") or [])]
    seen: set[tuple[str, str, str]] = set()
    away: list[list[Any]] = []
    for r in items:
        s = r.get("subject") or {}
        key = (s.get("kind", ""), s.get("namespace", ""), s.get("name", ""))
        if r.get("type") not in PLACING or key in seen:
            continue
        seen.add(key)
        opt = next((o for o in r.get("options") or [] if o.get("name") == name), None)
        if opt is not None and not opt.get("chosen"):
            away.append([f"{key[0]}/{key[1]}/{key[2]}", "feasible" if opt.get("feasible", True) else "filtered",
                         opt.get("reason") or "", r.get("time")])
    return here, away


def _explain_cluster(api: ApiClient, name: str, output: str) -> None:
    from drods.model.decision import latest_per_type

    r = api.request("GET", f"/api/v1/clusters/{name}", ok=(404,))
    if r.status_code == 404:
        raise CliError(f"cluster {name!r} not found", "NOT_FOUND")
    cluster = r.json()
    bindings = api.request("GET", "/api/v1/bindings").json()["items"]
    items = _decisions(api, {})
    here, away = _cluster_rows(name, bindings, items)
    own = [d for d in items if d.get("subject") == {"kind": "Cluster", "namespace": "", "name": name}]
    if output != "table":
        dump({"cluster": cluster, "placed": [{"binding": b, "replicas": n} for b, n in here],
              "notPlaced": [{"workload": w, "verdict": v, "reason": why, "time": t} for w, v, why, t in away],
              "decisions": own}, output)
        return
    spec, st = cluster.get("spec") or {}, cluster.get("status") or {}
    ready = next((c.get("status") for c in st.get("conditions") or [] if c.get("type") == "Ready"), "Unknown")
    cordoned = bool(cluster.get("unschedulable") or spec.get("unschedulable"))  # the flat view's, or a spec's
    _say(f"Cluster:    {name}\nReady:      {ready}\nCordoned:   {cordoned}")
    _say(f"Placed here ({len(here)}):")
    if here:
        print_table(["binding", "replicas"], here)
    _say(f"Left out by their latest placement decision ({len(away)}):")
    if away:
        print_table(["workload", "verdict", "why", "decided"], away)
    _say(f"Decisions about the cluster ({len(own)}):")
    latest = latest_per_type(own)
    for d in _newest_first(latest.values()):
        _say("")
        describe_decision(d)
    if len(own) > len(latest):
        _say(f"  ({len(own)} kept; --history is for workloads, or GET /api/v1/decisions?kind=Cluster&name={name})")


def explain(
    target: Annotated[str, typer.Argument(help="KIND/NAME (deployment/web, migrationplan/NAME, cluster/NAME), "
                                               "KIND/NAMESPACE/NAME, or 'cluster'.")],
    name: Annotated[str | None, typer.Argument(help="With 'cluster': the cluster's name.")] = None,
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The workload's namespace.")] = "default",
    history: Annotated[bool, typer.Option("--history", help="Every kept decision, newest first.")] = False,
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Why a workload is where it is (every decision about it), or why workloads are or aren't on a cluster."""
    check_output(output)
    try:
        api = connect(server, token, ca_file, insecure)
        if target == "cluster":
            if not name:
                raise typer.BadParameter("drods explain cluster NAME", param_hint="NAME")
            _explain_cluster(api, name, output)
            return
        kind, sep, wname = target.partition("/")
        if wname.count("/") == 1:  # KIND/NAMESPACE/NAME, as `drods migrate` names a workload
            namespace, _, wname = wname.partition("/")
        if not sep or not kind or not wname or "/" in wname or not namespace or name is not None:
            raise typer.BadParameter(f"{target!r}: use KIND/NAME (with -n NAMESPACE) or KIND/NAMESPACE/NAME, e.g. "
                                     "deployment/web", param_hint="TARGET")
        if kind.lower() in ("cluster", "clusters"):  # kubectl's form of `drods explain cluster NAME`
            _explain_cluster(api, wname, output)
            return
        if kind.lower() in _PLANS:
            _explain_plan(api, kind.lower(), namespace, wname, history, output)
            return
        _explain_workload(api, _kind_of(kind), namespace, wname, history, output)
    except CliError as e:
        fail(e)


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)

