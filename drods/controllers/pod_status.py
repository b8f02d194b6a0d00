"""A propagated Pod's status on the control plane, from its copies in the member clusters, so
``kubectl get pods`` against DRO-DS shows READY, STATUS and RESTARTS as a cluster would.

A Pod has no replicas: each selected cluster runs one whole copy. Their statuses add up as Karmada
adds them, with one difference so the counts stay those of one Pod:

* ``phase``: the first of Failed, Pending, Running, Succeeded that any copy reports (Karmada's order;
  no copy reported yet: Pending);
* ``containerStatuses`` / ``initContainerStatuses``: one per container name (Karmada lists every
  copy's, so two clusters print ``2/1`` ready) — ready and started only when so on every copy,
  ``restartCount`` summed, ``state`` and ``lastState`` of the first copy (by cluster name) not running;
* ``conditions``: every type a copy reports, True only when True on every copy;
* ``startTime``: the earliest.

Each copy's own phase, node and pod IP are on the Binding's ``status.clusters[]`` (`drods.controllers.aggregate`),
not here: a Pod's status keeps to ``PodStatus``, so a saved Pod applies back with kubectl.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
PHASE_ORDER = ("Failed", "Pending", "Running", "Succeeded")


def _containers(members: list[tuple[str, Obj]], field: str) -> list[Obj]:
    by_name: dict[str, list[Obj]] = {}
    for _, st in members:
        for cs in st.get(field) or []:
            if isinstance(cs, dict) and cs.get("name"):
                by_name.setdefault(str(cs["name"]), []).append(cs)
    out: list[Obj] = []
    for name, copies in by_name.items():
        telling = next((c for c in copies if "running" not in (c.get("state") or {})), copies[0])
        row: Obj = {k: telling[k] for k in ("image", "imageID", "state", "lastState") if k in telling}
        row.update(name=name, ready=all(bool(c.get("ready")) for c in copies),
                   restartCount=sum(int(c.get("restartCount") or 0) for c in copies))
        if any("started" in c for c in copies):
            row["started"] = all(bool(c.get("started")) for c in copies)
        out.append(row)
    return out


def _conditions(members: list[tuple[str, Obj]]) -> list[Obj]:
    merged: dict[str, Obj] = {}
    for _, st in members:
        for c in st.get("conditions") or []:
            if not isinstance(c, dict) or not c.get("type"):
                continue
            seen = merged.get(str(c["type"]))
            if seen is None or (seen.get("status") == "True" and c.get("status") != "True"):
                merged[str(c["type"])] = {k: c[k] for k in ("type", "status", "reason", "message",
                                                             "lastTransitionTime") if k in c}
    return [merged[t] for t in sorted(merged)]


def pod_status(members: dict[str, Obj]) -> Obj:
    """The template Pod's status from ``members`` (cluster → that copy's ``status``)."""
    copies = sorted(members.items())
    phases = {str(st.get("phase")) for _, st in copies}
    out: Obj = {"phase": next((p for p in PHASE_ORDER if p in phases), "Pending")}
    conditions = _conditions(copies)
    if conditions:
        out["conditions"] = conditions
    for field in ("initContainerStatuses", "containerStatuses"):
        rows = _containers(copies, field)
        if rows:
            out[field] = rows
    starts = sorted(str(st["startTime"]) for _, st in copies if st.get("startTime"))
    if starts:
        out["startTime"] = starts[0]
    qos = next((st["qosClass"] for _, st in copies if st.get("qosClass")), None)
    if qos is not None:
        out["qosClass"] = qos
    return out
