"""Status aggregation from Works, and the Binding status ownership both writers go through."""

from __future__ import annotations

from typing import Any

import pytest

from drods.controllers import aggregate
from drods.controllers import manifests as M
from drods.controllers.work_record import WorkRecord, work_record
from drods.model.annotations import ANN_HASH
from drods.model.binding import BindingStatus, owned_status
from drods.model.work import Ref
from drods.schedulerd.records import Decision, merge_status


def deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def plan(shares: dict[str, int]) -> dict[str, Any]:
    targets = [M.Target(c, n, {}) for c, n in sorted(shares.items())]
    return M.plan("b", "uid", deployment(sum(shares.values())), targets, [], [])


def work(p: M.ManifestSet, *, applied: bool = True, ready: int | None = None, observed: str | None = None,
         **status: Any) -> WorkRecord:
    main = p.manifests[-1]
    st: dict[str, Any] = {"observedHash": p.hash if observed is None else observed, "applied": applied, **status}
    if ready is not None:
        st["manifests"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "default", "name": "web",
                            "generation": 1, "manifestHash": main["metadata"]["annotations"][ANN_HASH],
                            "status": {"replicas": ready, "readyReplicas": ready, "observedGeneration": 1}}]
    rec = work_record({"metadata": {"name": "w"}, "spec": {"hash": p.hash, "manifests": p.manifests}, "status": st},
                      1)
    assert rec is not None
    return rec


def test_running_once_every_work_is_applied_and_ready() -> None:
    plans = plan({"a": 2, "b": 1})
    works = {"a": work(plans["a"], ready=2), "b": work(plans["b"], ready=1)}
    rollup = aggregate.current_entries("Deployment", {"a": 2, "b": 1}, plans, works, {}, {}, 3)
    assert rollup.all_applied and rollup.all_ready and rollup.ready_applied == 3
    st = aggregate.binding_status({"phase": "Scheduled"}, "Deployment", rollup, [], active=True, now="t")
    assert st["phase"] == "Running"
    assert [e["readyReplicas"] for e in st["clusters"]] == [2, 1]
    works["b"] = work(plans["b"], ready=0)
    rollup = aggregate.current_entries("Deployment", {"a": 2, "b": 1}, plans, works, {}, {}, 3)
    assert aggregate.binding_status({"phase": "Running"}, "Deployment", rollup, [], active=True,
                                    now="t")["phase"] == "Propagated"


def test_failures_fail_the_binding_after_the_threshold_or_at_once_when_permanent() -> None:
    plans = plan({"a": 1})
    twice = {"a": work(plans["a"], applied=False, message="boom", failures=2)}
    rollup = aggregate.current_entries("Deployment", {"a": 1}, plans, twice, {}, {}, 3)
    assert not rollup.errors and rollup.entries[0]["lastError"] == "boom"
    thrice = {"a": work(plans["a"], applied=False, message="boom", failures=3)}
    assert aggregate.current_entries("Deployment", {"a": 1}, plans, thrice, {}, {}, 3).errors == ["a: boom"]
    permanent = {"a": work(plans["a"], applied=False, message="conflict", failures=1, permanent=True)}
    rollup = aggregate.current_entries("Deployment", {"a": 1}, plans, permanent, {}, {}, 3)
    st = aggregate.binding_status({"phase": "Propagated"}, "Deployment", rollup, [], active=True, now="t")
    assert st["phase"] == "Failed" and st["conditions"][0]["reason"] == "ApplyFailed"


def test_anothers_object_of_that_name_counts_for_nothing() -> None:
    """A copy DRO-DS refuses to manage (not its object: "not managed by DRO-DS") still added the other
    Deployment's ready replicas to the workload's — a pull agent reports what the member holds."""
    plans = plan({"a": 1})
    theirs = work(plans["a"], applied=False, ready=4, message="Deployment default/web already exists in a and is "
                  "not managed by DRO-DS", failures=1, permanent=True)
    row = theirs.status["manifests"][0]
    del row["manifestHash"]  # no hash of ours on it
    spec = {"hash": plans["a"].hash, "manifests": plans["a"].manifests}
    theirs = work_record({"metadata": {"name": "w"}, "spec": spec, "status": {**theirs.status, "manifests": [row]}},
                         1) or theirs
    before = {"a": {"cluster": "a", "readyReplicas": 4, "observedReplicas": 4}}  # as an older status counted them
    rollup = aggregate.current_entries("Deployment", {"a": 1}, plans, {"a": theirs}, before, {}, 3)
    (entry,) = rollup.entries
    assert not entry.get("readyReplicas") and not entry.get("observedReplicas") and not entry["applied"], entry
    assert "not managed by DRO-DS" in entry["lastError"]


def test_a_pull_work_waits_for_its_agent_and_an_old_status_does_not_count() -> None:
    plans = plan({"edge": 1})
    stale = {"edge": work(plans["edge"], observed="older-hash")}
    rollup = aggregate.current_entries("Deployment", {"edge": 1}, plans, stale, {}, {"edge": True}, 3)
    assert not rollup.all_applied and rollup.entries[0]["lastError"] == aggregate.WAITING_FOR_AGENT
    refused = {"edge": work(plans["edge"], applied=False, message="quota")}
    rollup = aggregate.current_entries("Deployment", {"edge": 1}, plans, refused, {}, {"edge": True}, 3)
    assert rollup.entries[0]["lastError"] == "agent: quota"


def test_controllers_and_scheduler_write_only_their_own_status_fields() -> None:
    current = {"phase": "Running", "placement": [{"cluster": "a", "replicas": 1}], "clusters": [{"cluster": "a"}]}
    with pytest.raises(ValueError, match="placement"):
        owned_status(current, {**current, "placement": []}, BindingStatus.CONTROLLER_FIELDS)
    with pytest.raises(ValueError, match="cannot set phase 'Unschedulable'"):
        owned_status(current, {**current, "phase": "Unschedulable"}, BindingStatus.CONTROLLER_FIELDS)
    with pytest.raises(ValueError, match="clusters"):
        owned_status(current, {**current, "clusters": []}, BindingStatus.SCHEDULER_FIELDS)
    # the scheduler's own merge keeps the controllers' fields as they are
    d = Decision(scheduled=True, placement=(("b", 1),), message="ok", reasons={}, generation=2, time=0.0)
    merged = merge_status(current, d)
    assert merged["clusters"] == current["clusters"] and merged["phase"] == "Scheduled"


def test_a_jobs_own_report_reaches_its_binding_entry() -> None:
    """A Job's ``multicluster.io/run-report`` read back on the Work lands on the entry (a copy's figures);
    a Deployment's manifest row never carries one, and a report no longer on the Work is dropped."""
    job = Ref("batch/v1", "Job", "shop", "copy-0")
    report = {"bytes": 10, "checksum": "c", "sourceChecksum": "c"}
    row = {"apiVersion": "batch/v1", "kind": "Job", "namespace": "shop", "name": "copy-0",
           "status": {"succeeded": 1}, "report": report}

    def rec(rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The status of a Work carrying ``rows``, as its record decodes it."""
        record = work_record({"metadata": {"name": "w"}, "spec": {}, "status": {"manifests": rows}}, 1)
        assert record is not None
        return record.status

    entry: dict[str, Any] = {"cluster": "b"}
    aggregate.fill_usage(entry, rec([row]), job)
    assert entry["report"] == report
    aggregate.fill_usage(entry, rec([]), job)
    assert "report" not in entry
    web = Ref("apps/v1", "Deployment", "shop", "copy-0")
    aggregate.fill_usage(entry, rec([{**row, "kind": "Deployment", "apiVersion": "apps/v1"}]), web)
    assert "report" not in entry


def test_a_copy_whose_count_an_override_set_is_judged_by_that_count() -> None:
    """Duplicated 2 to a, b and c with an OverridePolicy giving a one replica: the Binding said "5/6 replicas
    ready" for good and its old copies waited the graceful timeout, while the Deployment was Available."""
    from drods.model.policy import ClusterOverridePolicySpec

    one_on_a = ClusterOverridePolicySpec.model_validate({
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
        "overrides": [{"clusterSelector": {"names": ["a"]},
                       "plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 1}]}]})
    shares = {"a": 2, "b": 2, "c": 2}
    plans = M.plan("b", "uid", deployment(2), [M.Target(c, n, {}) for c, n in shares.items()], [],
                   [("web-cop", one_on_a)])
    assert plans["a"].replicas == 1 and plans["a"].summary().replicas == 1 and plans["b"].replicas == 2
    works = {"a": work(plans["a"], ready=1), "b": work(plans["b"], ready=2), "c": work(plans["c"], ready=2)}
    rollup = aggregate.current_entries("Deployment", shares, plans, works, {}, {}, 3)
    assert rollup.all_ready and (rollup.desired, rollup.placed, rollup.ready_applied) == (5, 6, 5)
    st = aggregate.binding_status({"phase": "Scheduled"}, "Deployment", rollup, [], active=True, now="t")
    assert st["phase"] == "Running" and [e["replicas"] for e in st["clusters"]] == [1, 2, 2]
    assert next(c for c in st["conditions"] if c["type"] == "Ready")["status"] == "True", st["conditions"]


def test_a_jobs_start_and_completion_are_aggregated_as_karmada_does() -> None:
    """`kubectl get jobs` showed an empty DURATION: the earliest start, and the latest completion once every
    copy completed."""
    from drods.controllers.status import observe, template_status

    def member_job(start: str, end: str | None) -> dict[str, Any]:
        conds = [{"type": "Complete", "status": "True"}] if end else []
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "generation": 1},
                "status": {"startTime": start, "succeeded": 1 if end else 0, "active": 0 if end else 1,
                           **({"completionTime": end} if end else {}), "conditions": conds}}

    def entries(*jobs: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for c, job in zip("ab", jobs, strict=True):
            e: dict[str, Any] = {"cluster": c, "replicas": 1, "applied": True}
            aggregate.fill_observation(e, "Job", observe(job), None)
            out.append(e)
        return out

    running = template_status("Job", {}, 1, entries(member_job("2026-12-06T06:00:05Z", "2026-12-06T06:00:40Z"),
                                                     member_job("2026-12-06T06:00:02Z", None)), True, {}, "t")
    assert running["startTime"] == "2026-12-06T06:00:02Z" and "completionTime" not in running
    done = template_status("Job", {}, 1, entries(member_job("2026-12-06T06:00:05Z", "2026-12-06T06:00:40Z"),
                                                  member_job("2026-12-06T06:00:02Z", "2026-12-06T06:00:31Z")),
                           True, {}, "t")
    assert (done["startTime"], done["completionTime"]) == ("2026-12-06T06:00:02Z", "2026-12-06T06:00:40Z")


def test_a_suspended_dispatch_says_so_rather_than_applying() -> None:
    """`spec.suspension.dispatching` and a scale: the Binding read "Applying: applied in 0/3 cluster(s)"
    while the members ran the previous copies and nothing would apply."""
    plans = plan({"a": 2, "b": 1})
    stale = {"a": work(plans["a"], observed="old", ready=2), "b": work(plans["b"], observed="old", ready=1)}
    rollup = aggregate.current_entries("Deployment", {"a": 2, "b": 1}, plans, stale, {}, {}, 3)
    assert not rollup.all_applied
    st = aggregate.binding_status({"phase": "Scheduled"}, "Deployment", rollup, [], active=True, now="t",
                                  suspended=frozenset({"a", "b"}))
    cond = next(c for c in st["conditions"] if c["type"] == "Propagated")
    assert (cond["status"], cond["reason"]) == ("False", "Suspended"), cond
    assert "dispatching to a, b is suspended (spec.suspension)" in cond["message"], cond
    plain = aggregate.binding_status({"phase": "Scheduled"}, "Deployment", rollup, [], active=True, now="t")
    assert next(c for c in plain["conditions"] if c["type"] == "Propagated")["reason"] == "Applying"


def test_a_partial_placement_says_what_is_not_placed() -> None:
    """39 of 500 placed and all ready read as a healthy workload: Binding Ready "39/39", the Deployment
    Available "39/39" (walkthrough AQ). The unplaced replicas are a Scheduled False condition and count
    as wanted and unavailable on the template."""
    from drods.controllers.status import template_status

    plans = plan({"a": 2, "b": 1})
    works = {"a": work(plans["a"], ready=2), "b": work(plans["b"], ready=1)}
    rollup = aggregate.current_entries("Deployment", {"a": 2, "b": 1}, plans, works, {}, {}, 3)
    st = aggregate.binding_status({"phase": "Scheduled"}, "Deployment", rollup, [], active=True, now="t", pending=7)
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Scheduled"]["status"] == "False" and conds["Scheduled"]["reason"] == "PartiallyScheduled"
    assert conds["Scheduled"]["message"] == "placed 3/10 replicas: 7 not placed (yet)"
    assert conds["Ready"]["message"] == "3/3 replicas ready (7 more not placed)"
    whole = aggregate.binding_status({"phase": "Scheduled"}, "Deployment", rollup, [], active=True, now="t")
    assert "Scheduled" not in {c["type"] for c in whole["conditions"]}
    entries = [{"cluster": "a", "replicas": 3, "applied": True, "observedReplicas": 3, "readyReplicas": 3,
                "availableReplicas": 3, "updatedReplicas": 3}]
    partial = template_status("Deployment", {"replicas": 10}, 1, entries, True, {}, "t", pending=7)
    (available,) = partial["conditions"]
    assert available["status"] == "False" and available["message"].startswith("3/10 replicas available"), available
    whole_template = template_status("Deployment", {"replicas": 3}, 1, entries, True, {}, "t")
    assert whole_template["conditions"][0]["status"] == "True"
