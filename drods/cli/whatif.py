"""``drods whatif -f FILE`` (dry-run placement, W1) and ``drods simulate`` (policy simulator, W2/W3).

``whatif`` sends ``POST /api/v1/whatif``. FILE holds the request body itself (``binding`` or
``workload`` [+ ``policy``] + ``changes``), or a flat binding body (as for ``POST
/api/v1/bindings``), or a Deployment / StatefulSet / Job, optionally followed by the
PropagationPolicy to try (a multi-document YAML). ``--down``, ``--cordon`` and ``--water-level
CLUSTER=0.9`` add changes.

``simulate`` runs locally, no server needed: the scenario (docs/whatif.md) through every policy,
then ``summary.json``, PNG plots and ``index.html`` in ``--out``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from drods.cli.remote import (
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
    read_sources,
    stderr,
    stdout,
)


def request_body(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``POST /api/v1/whatif`` body for the documents of ``-f``: a request, a binding body, a Binding
    as ``kubectl get binding -o yaml`` prints it, or one workload with at most one placement policy."""
    from drods.model.detection import DETECTED_KINDS
    from drods.model.kinds import BINDING, PLACEMENT_POLICY_KINDS, by_kind

    if len(docs) == 1 and ("binding" in docs[0] or "workload" in docs[0]):
        return dict(docs[0])
    if len(docs) == 1 and "kind" not in docs[0]:
        return {"binding": docs[0]}
    kinds = [by_kind(str(d.get("apiVersion", "")), str(d.get("kind", ""))) for d in docs]
    if len(docs) == 1 and kinds[0] is BINDING:
        name = (docs[0].get("metadata") or {}).get("name")
        return {"binding": {**(docs[0].get("spec") or {}), **({"name": name} if name else {})}}
    workloads = [d for d, k in zip(docs, kinds, strict=True) if k in DETECTED_KINDS]
    policies = [d for d, k in zip(docs, kinds, strict=True) if k in PLACEMENT_POLICY_KINDS]
    if len(workloads) == 1 and len(policies) <= 1 and len(docs) == len(workloads) + len(policies):
        body: dict[str, Any] = {"workload": workloads[0]}
        if policies:
            body["policy"] = policies[0]
        return body
    raise CliError("FILE must hold a what-if request, a binding (its body or the Binding object), or one "
                   "workload (and at most one placement policy)", "MALFORMED_FILE")


def _changes(down: list[str], cordon: list[str], water: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"cluster": c, "down": True} for c in down]
    out += [{"cluster": c, "cordon": True} for c in cordon]
    for item in water:
        name, sep, value = item.partition("=")
        try:
            out.append({"cluster": name, "waterLevel": float(value)})
        except ValueError:
            sep = ""
        if not sep or not name:
            raise typer.BadParameter(f"{item!r}: use CLUSTER=FRACTION, e.g. a=0.9", param_hint="--water-level")
    return out


def whatif(
    filename: Annotated[list[str], typer.Option("--filename", "-f", help="The request, binding or workload file.")],
    down: Annotated[list[str], typer.Option("--down", help="Assume this cluster is down (repeatable).")] = [],  # noqa: B006
    cordon: Annotated[list[str], typer.Option("--cordon", help="Assume this cluster is cordoned.")] = [],  # noqa: B006
    water_level: Annotated[list[str], typer.Option("--water-level", help="CLUSTER=FRACTION: assume this load.")] = [],  # noqa: B006
    output: OutputOpt = "table",
    server: ServerOpt = "https://127.0.0.1:8080",
    token: TokenOpt = None,
    ca_file: CaFileOpt = None,
    insecure: InsecureOpt = False,
) -> None:
    """Show where the scheduler would place a binding or workload now, and why; nothing is stored."""
    check_output(output)
    try:
        body = request_body([doc for _, doc in read_sources(filename)])
        body["changes"] = list(body.get("changes") or []) + _changes(down, cordon, water_level)
        out = connect(server, token, ca_file, insecure).request("POST", "/api/v1/whatif", json=body).json()
    except CliError as e:
        fail(e)
    if output != "table":
        dump(out, output)
        return
    ex = out["explanation"]
    res = ex["result"]
    stdout().print(f"{out['phase']}: {res['message']}", markup=False)
    if out.get("placementKept"):
        stdout().print("placement kept: nothing moves (an unplaced decision keeps what runs)", markup=False)
    adj = ex.get("adjuster") or {}
    line = f"profile {ex['profile']}, division {ex['division']}"
    if adj.get("mode") is not None:  # an Unschedulable decision ran no adjuster: nothing to say of it
        line += (f", adjuster {adj['mode']} (σ={adj.get('spread')}, "
                 f"fleet water level {adj.get('fleetWaterLevel')})")
    stdout().print(line, markup=False)
    _unknown(ex)
    scores = ex.get("scores") or {}
    plugins = [p for p in scores if p != "total"]
    rows = [[p["cluster"], p["replicas"], scores.get("total", {}).get(p["cluster"], ""),
             *(scores[k].get(p["cluster"], "") for k in plugins)] for p in out["placement"]]
    if rows:
        print_table(["cluster", "replicas", "total", *plugins], rows)
    _why_not(ex)
    reasons = ex["filters"]["reasons"]
    if reasons:
        # a cluster a capacity filter turned away keeps what it runs there (no growth): said so, or the
        # table would contradict the placement above it
        running = {p["cluster"] for p in out["placement"]}
        stdout().print("filtered out:", markup=False)
        print_table(["cluster", "reason"], sorted(
            (c, f"{r} (keeps the replicas it runs, takes no more)" if c in running else r) for c, r in reasons.items()))
        if ex["filters"].get("reasonsOmitted"):
            stdout().print(f"… and {ex['filters']['reasonsOmitted']} more", markup=False)


def _unknown(ex: dict[str, Any]) -> None:
    """Each cluster name the placement gives that no cluster has, said as such: a typo otherwise reads
    only as every real cluster being "not in clusterAffinity.clusterNames"."""
    fields = ex.get("unknownClusterFields") or {}
    for name in ex.get("unknownClusterNames") or []:
        where = ", ".join(fields.get(name) or []) or "the placement"
        stdout().print(f"no cluster named {name!r} ({where}): nothing is placed there until a cluster of that "
                       "name joins — a typo?", markup=False)


WHY_NOT_SHOWN = 10  # the feasible clusters that got nothing said in the table; the JSON has them all


def _why_not(ex: dict[str, Any]) -> None:
    """The runner-up and why each other feasible cluster got nothing, as ``drods explain`` says them."""
    ru = ex.get("runnerUp") or {}
    if ru.get("why"):
        stdout().print(f"runner-up: {ru['why']}", markup=False)
    why = {c: w for c, w in (ex.get("whyNot") or {}).items() if c != ru.get("name")}
    if not why:
        return
    stdout().print("not chosen:", markup=False)
    print_table(["cluster", "why"], list(why.items())[:WHY_NOT_SHOWN])
    if len(why) > WHY_NOT_SHOWN:
        stdout().print(f"… and {len(why) - WHY_NOT_SHOWN} more (-o json lists them)", markup=False)


def simulate(
    scenario: Annotated[Path, typer.Option("--scenario", help="Scenario file (YAML or JSON, docs/whatif.md).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for summary.json, the plots and index.html.")],
    policies: Annotated[str | None, typer.Option("--policies", help="Comma-separated: WaterLevel,"
                                                 "AvailableReplicas,Static,Aggregated (default: all).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", min=0, help="Override the scenario's seed.")] = None,
) -> None:
    """Run a scenario through the policies in simulated time and write an evaluation report."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from drods.errors import ApiError
    from drods.whatif.engine import prepare
    from drods.whatif.engine import simulate as run
    from drods.whatif.policies import parse_policies
    from drods.whatif.report import write_report
    from drods.whatif.scenario import load_scenario

    try:
        names = parse_policies(policies)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--policies") from e
    if out.exists() and not out.is_dir():  # said now, not after the whole run
        raise typer.BadParameter(f"{out} is a file, not a folder", param_hint="--out")
    try:
        scn, base = load_scenario(scenario)
        inputs = prepare(scn, seed, base)
    except ApiError as e:
        fail(CliError(e.message, e.code, details=e.details))  # a local file: no HTTP status to name
    except ValueError as e:
        fail(CliError(str(e), "VALIDATION_FAILED"))
    writable_folder(out)  # made once the scenario is valid, proved writable before the run
    console = stderr()
    with Progress(TextColumn("{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        tasks = {n: bar.add_task(n, total=scn.ticks) for n in names}

        def progress(policy: str, tick: int, _total: int) -> None:
            bar.update(tasks[policy], completed=tick)

        traces = run(inputs, names, progress)
    summary = write_report(out, inputs, traces)
    print_summary(summary)
    stdout().print(f"report: {out / 'index.html'}", markup=False)


def writable_folder(out: Path) -> None:
    """``--out`` made (with its parents) and proved writable, or a usage error naming why."""
    import tempfile

    if out.exists() and not out.is_dir():
        raise typer.BadParameter(f"{out} is a file, not a folder", param_hint="--out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".drods-write-test-"):
            pass
    except OSError as e:
        why = e.strerror or str(e)
        if isinstance(e, FileExistsError | NotADirectoryError):
            why = "a file is in the way of the folder"
        raise typer.BadParameter(f"cannot write the report under {out}: {why}", param_hint="--out") from e


def print_summary(summary: dict[str, Any]) -> None:
    """The figures per policy (both kinds of SLA breaches, the gaps to the ideal) and, per baseline,
    whether the default policy dominates it and on which figures it does not."""
    print_table(["policy", "peak", "ideal peak", "peak gap", "p95", "pending·min", "sla wl", "sla latency",
                 "p95 latency ms", "latency gap ms", "moved", "cross-domain GiB", "cost"],
                [[n, f["peak_water_level"], f["ideal_peak_mean"], f["peak_gap_mean"], f["p95_water_level"],
                  f["pending_replica_minutes"], f["sla_water_level_breaches"], f["sla_latency_breaches"],
                  f["p95_user_latency_ms"], f["latency_gap_ms"], f["replicas_moved"],
                  round(f["cross_domain_bytes"] / 1024**3, 1), f["cost"]]
                 for n, f in summary["policies"].items()])
    comparison = summary.get("comparison") or {}
    if comparison:
        print_table(["WaterLevel against", "dominates", "worse on"],
                    [[n, str(c["dominates"]).lower(), ", ".join(c["worseOn"]) or "-"] for n, c in comparison.items()])
        for n, c in comparison.items():
            for figure, why in (c.get("givesWay") or {}).items():
                stdout().print(f"{figure} gives way against {n}: {why}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("whatif")(whatif)
    app.command("simulate")(simulate)
