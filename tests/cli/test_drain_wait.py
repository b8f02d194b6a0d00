"""``drods cluster drain --wait`` names a binding as left in place only on a decision the scheduler
made after the drain asked it to move: an Unschedulable phase from before says nothing yet."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from drods.cli.cluster_ops import bindings_on
from drods.cli.main import app


class _Api:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def get_json(self, path: str) -> dict[str, Any]:
        return {"items": self.items}


def _binding(name: str, decided: str, asked: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"rescheduleTriggeredAt": asked} if asked else {},
            "status": {"phase": "Unschedulable", "message": "no room", "scheduledTime": decided,
                       "placement": [{"cluster": "c", "replicas": 2}]}}


def test_only_a_decision_after_the_drain_leaves_a_binding_in_place() -> None:
    api = _Api([_binding("old-verdict", "2026-12-05T10:00:00.000Z", "2026-12-05T10:05:00Z"),
                _binding("decided", "2026-12-05T10:05:01.000Z", "2026-12-05T10:05:00Z"),
                _binding("never-asked", "2026-12-05T09:00:00.000Z", None)])
    placed, present, stuck = bindings_on(api, "c")  # type: ignore[arg-type]
    assert placed == present == ["old-verdict", "decided", "never-asked"]
    assert stuck == {"decided": "cannot be placed elsewhere: no room",
                     "never-asked": "cannot be placed elsewhere: no room"}


def test_a_negative_timeout_is_refused_before_the_drain() -> None:
    """It was taken, and the cluster cordoned and drained without waiting at all."""
    r = CliRunner().invoke(app, ["cluster", "drain", "m1", "--wait", "--timeout", "-5",
                                 "--server", "https://127.0.0.1:9"])  # nothing listens: it must not get there
    assert r.exit_code == 2 and "--timeout" in r.output, r.output


def test_a_partial_placement_elsewhere_leaves_the_copy_in_place_and_says_how_much_moved() -> None:
    """The binding controller keeps the drained cluster's copy until the workload's replicas are ready
    elsewhere: waiting for it to go would last the graceful timeout."""
    partial = {"metadata": {"name": "web"},
               "spec": {"replicas": 4, "rescheduleTriggeredAt": "2026-12-05T10:05:00Z"},
               "status": {"phase": "Scheduled", "scheduledTime": "2026-12-05T10:05:01.000Z",
                          "placement": [{"cluster": "d", "replicas": 3}],
                          "clusters": [{"cluster": "d", "replicas": 3}, {"cluster": "c", "removing": True}]}}
    whole = {"metadata": {"name": "api"},
             "spec": {"replicas": 2, "rescheduleTriggeredAt": "2026-12-05T10:05:00Z"},
             "status": {"phase": "Scheduled", "scheduledTime": "2026-12-05T10:05:01.000Z",
                        "placement": [{"cluster": "d", "replicas": 2}],
                        "clusters": [{"cluster": "d", "replicas": 2}, {"cluster": "c", "removing": True}]}}
    placed, present, stuck = bindings_on(_Api([partial, whole]), "c")  # type: ignore[arg-type]
    assert placed == [] and present == ["web", "api"]
    assert stuck == {"web": "3 of 4 replicas placed elsewhere, the copy there stays until the rest are "
                            "(or the graceful timeout passes)"}


def test_a_dry_run_says_where_each_binding_would_go_and_what_would_wait(monkeypatch: Any) -> None:
    """`--dry-run` asks the server's dry run (nothing cordoned) and prints its forecast."""
    import drods.cli.cluster_ops as ops
    from tests.cli.fixed_answer import FixedAnswer

    asked: list[tuple[str, Any]] = []
    answer = {"cluster": "c", "cordoned": False, "dryRun": True, "rescheduled": ["web", "api"],
              "migrationPlans": ["shop/db"], "refused": [], "replicas": 14,
              "message": "dry run: cluster c would be cordoned; 2 binding(s) rescheduled, 1 workload(s) migrated; "
                         "3 replica(s) would wait for room (see forecast)",
              "forecast": {"pendingReplicas": 3, "bindings": [
                  {"binding": "web", "placement": [{"cluster": "d", "replicas": 5}], "requested": 5, "placed": 5,
                   "pending": 0},
                  {"binding": "api", "placement": [{"cluster": "d", "replicas": 4}], "requested": 7, "placed": 4,
                   "pending": 3}]}}

    class Api:
        def request(self, method: str, path: str, **kw: Any) -> FixedAnswer:
            asked.append((path, kw.get("params")))
            return FixedAnswer(200, answer)

    monkeypatch.setattr(ops, "connect", lambda *a, **k: Api())
    r = CliRunner().invoke(app, ["cluster", "drain", "c", "--dry-run", "--server", "https://x", "--token", "t"])
    assert r.exit_code == 0, r.output
    assert asked == [("/api/v1/clusters/c/drain", {"dryRun": "All"})]
    lines = r.output.splitlines()
    assert lines[0].endswith("3 replica(s) would wait for room (see forecast)")
    assert "would get a migration plan: shop/db" in lines and "  web: d 5" in lines
    assert "  api: d 4; 3 of 7 replica(s) would wait for room" in lines, lines
