"""The scheduler's side of users learned from demand: what a Binding says about its
users, and whether a move towards them pays.

Steering writes the learned users on the Binding (``multicluster.io/learned-users``) with a
reschedule whose reason begins "users moved". The re-decision moves replicas only when the
replica-weighted latency from the users drops by at least ``usersMinGainMs`` and the fleet's move
budget (``fleetChange.maxMovesPerMinute``, shared with fleet changes) grants every replica it moves;
otherwise the placement stays and the decision says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drods.model.annotations import RESCHEDULE_REASON, USERS_MOVED, annotation, learned_users
from drods.scheduler.plugins.user_distance import placement_latency
from drods.scheduler.snapshot import Snapshot
from drods.scheduler.users import UserDemand

Pairs = Sequence[tuple[str, int]]


def learned(obj: Mapping[str, Any]) -> tuple[UserDemand | None, float | None]:
    """The learned users on a Binding object and their latency SLO (None, None: none)."""
    doc = learned_users(obj)
    if doc is None:
        return None, None
    sites = [("site", str(u.get("site")), float(u.get("weight") or 0.0)) for u in doc["sites"]
             if isinstance(u, dict) and u.get("site")]
    slo = doc.get("latencySLOMs")
    return UserDemand.of(sites, "learned"), float(slo) if isinstance(slo, int | float) and slo > 0 else None


def users_moved(obj: Mapping[str, Any]) -> bool:
    """Was the Binding's last reschedule asked because its learned users moved?"""
    return (annotation(obj, RESCHEDULE_REASON) or "").startswith(USERS_MOVED)


def moved_replicas(old: Pairs, new: Pairs) -> int:
    """Replicas that start somewhere new (a scale-up's additions not counted)."""
    before = dict(old)
    grew = sum(max(0, k - before.get(c, 0)) for c, k in new)
    return grew - max(0, sum(k for _, k in new) - sum(before.values()))


@dataclass(frozen=True, slots=True)
class MoveVerdict:
    pays: bool
    gain_ms: float | None
    moved: int
    message: str
    before_ms: float | None = None  # replica-weighted latency from the users, where the replicas are
    after_ms: float | None = None  # … and where the move would put them
    min_gain_ms: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """``usersMove`` of a decision's analysis: why the users' move did or did not move replicas
        (a paying move is recorded as a ``Rebalance`` decision, `drods.model.decision`)."""
        return {"pays": self.pays, "moved": self.moved, "gainMs": _ms(self.gain_ms), "beforeMs": _ms(self.before_ms),
                "afterMs": _ms(self.after_ms), "minGainMs": self.min_gain_ms}


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def judge_move(snap: Snapshot, users: UserDemand, old: Pairs, new: Pairs, min_gain_ms: float) -> MoveVerdict:
    """Does moving from ``old`` to ``new`` bring the users at least ``min_gain_ms`` closer?"""
    moved = moved_replicas(old, new)
    before, after = placement_latency(snap, users, old), placement_latency(snap, users, new)
    if moved == 0:
        return MoveVerdict(False, None, 0, "the users moved; the placement already serves them best", before, after,
                           min_gain_ms)
    if before is None or after is None:
        return MoveVerdict(False, None, moved, "the users moved; their latency to these clusters is unknown",
                           before, after, min_gain_ms)
    gain = before - after
    if gain < min_gain_ms:
        return MoveVerdict(False, gain, moved, f"the users moved; moving {moved} replicas would bring them "
                           f"{gain:.1f} ms closer ({before:.1f} → {after:.1f} ms), under the minimum gain of "
                           f"{min_gain_ms:g} ms: the placement stays", before, after, min_gain_ms)
    return MoveVerdict(True, gain, moved, f"the users moved: {moved} replicas follow them, {before:.1f} → "
                       f"{after:.1f} ms on average ({gain:.1f} ms gained)", before, after, min_gain_ms)


def decision_users(analysis: Mapping[str, Any]) -> dict[str, Any] | None:
    """``status.users`` of a decision: the users it used, their source, the latency SLO and each chosen
    cluster's latency from them (None: the decision knew no users)."""
    users = analysis.get("users")
    return dict(users) if isinstance(users, dict) else None


def declared_users_changed(declared: UserDemand | None, obj: Mapping[str, Any]) -> bool:
    """A spec change that restates the users (``placement.users``) differently from those the last decision
    used: the operator said where the demand is now, so the placement is divided by the new shares again
    (within the move budget) rather than kept wherever it still meets the SLO."""
    if declared is None:
        return False
    last = (obj.get("status") or {}).get("users")
    if not isinstance(last, dict) or last.get("source") != "declared":
        return True
    return sorted(map(_site_key, last.get("sites") or [])) != sorted(map(_site_key, declared.to_list()))


def _site_key(site: Any) -> tuple[str, str, float]:
    """A ``status.users.sites`` row as (kind, place, share rounded as stored)."""
    row = site if isinstance(site, Mapping) else {}
    kind = next((k for k in ("site", "city", "region") if k in row), "")
    return kind, str(row.get(kind, "")), round(float(row.get("weight") or 0.0), 4)
