"""The kill campaign's short version (``bench/chaos.py`` runs the long one): one SIGKILL of each process
kind — an API server, the scheduler, the controllers, an etcd member — at a random instant while
Deployments are created, scaled and deleted through two API servers. After each round every
acknowledged write is served, no Work is duplicated or orphaned and every member holds exactly what
its Works say, within the convergence deadline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.etcd_server import etcd_binary
from tests.ha_e2e.chaos import campaign, fleet

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(400)]


def test_a_kill_of_each_kind_loses_nothing(tmp_path: Path) -> None:
    if etcd_binary() is None:
        pytest.skip("etcd binary not found")
    with fleet(tmp_path) as fl:
        res, writer = campaign(fl, kills_per_kind=1, seed=20261128, time_limit=60, converge_timeout=60)
    summary = res.summary(writer, 0)
    print(summary)
    assert res.rounds == 4 and sum(res.kills.values()) == 4, summary
    assert not res.lost and not res.orphans and not res.duplicates, (res.lost, res.orphans, res.duplicates)
    assert not res.unconverged, res.unconverged
    assert writer.counts["acknowledged"] >= 10, writer.counts
