"""``drods agent`` (A4, C1): a pull-mode cluster's status pushed by an agent process that reads the
member through its Kubernetes API, at the interval the control plane asks for."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from drods.model.timefmt import parse_rfc3339
from tests.members_e2e.conftest import Env, wait_for
from tests.server_process import drods_command

AGENT = "edge-agent"  # registered in pull mode; the agent reads aws-dfw's API for it


def _reports(env: Env) -> float:
    """Accepted pushed reports so far (the joined members are read by the control plane, not pushed)."""
    text = env.http.get("/metrics").text
    m = re.search(r'^drods_monitor_reports_total\{result="accepted",source="push"\} ([\d.e+]+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def _agent(env: Env, token: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*drods_command(), "agent", "--cluster", AGENT, "--kubeconfig", str(env.members["aws-dfw"].sim.kubeconfig),
         "--server", env.server.url, "--token", token, "--interval", "30", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env.server.environ())


@pytest.fixture
def pull_cluster(env: Env) -> Iterator[str]:
    r = env.http.post("/api/v1/clusters", json={"name": AGENT, "syncMode": "Pull", "labels": {"site": "edge"}})
    assert r.status_code == 201, r.text
    yield env.server.token("cluster-agent", cluster=AGENT)
    env.http.delete(f"/api/v1/monitor/subscriptions/{AGENT}-router")
    env.http.delete(f"/api/v1/clusters/{AGENT}")


def test_agent_reports_at_the_interval_the_control_plane_asks_for(env: Env, pull_cluster: str) -> None:
    # A subscriber needs this cluster fresh within 2 s; every answer to the agent says so, and the agent
    # follows it rather than its own --interval of 30 s (which would allow one report in this test).
    r = env.http.put(f"/api/v1/monitor/subscriptions/{AGENT}-router",
                     json={"maxAgeSeconds": 2, "reason": "routes edge traffic by live load",
                           "clusterSelector": {"names": [AGENT]}})
    assert r.status_code == 201, r.text
    before = _reports(env)
    proc = _agent(env, pull_cluster)
    try:
        def visible() -> dict[str, Any] | None:
            st: dict[str, Any] = (env.http.get(f"/api/v1/clusters/{AGENT}").json().get("status") or {})
            res: dict[str, Any] = st.get("resources") or {}
            return res if res.get("cpu") and st["conditions"][0]["status"] == "True" else None

        status = wait_for(visible, 20, "the agent's first report in the cluster's status")
        assert status["source"] == "push"
        # The same member read by the control plane itself (aws-dfw is joined in push mode): same capacity.
        own = env.http.get("/api/v1/clusters/aws-dfw").json()["status"]["resources"]
        assert status["cpu"]["capacity"] == pytest.approx(own["cpu"]["capacity"])
        assert status["memory"]["capacity"] == pytest.approx(own["memory"]["capacity"])
        assert env.http.get("/api/v1/monitor/realtime").json()["clusters"][AGENT]["active"] is True
        wait_for(lambda: _reports(env) >= before + 4, 20, "reports every ~2 s, as the subscription asks")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err


def test_agent_with_another_clusters_token_stops_with_a_clear_error(env: Env, pull_cluster: str) -> None:
    other = env.server.token("cluster-agent", cluster="gcp-sin")
    proc = _agent(env, other)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 1 and "refused the token for cluster edge-agent: HTTP 403" in err, err


def test_a_pull_member_measures_its_distance_to_a_probe_target(env: Env, pull_cluster: str) -> None:
    sim = env.members["aws-dfw"].sim
    sim.latency(f"{AGENT}=30±2")  # the agent's site is 30 ms from aws-dfw's API
    try:
        out = subprocess.run([*drods_command(), "agent", "--cluster", AGENT, "--kubeconfig", str(sim.kubeconfig),
                              "--server", env.server.url, "--token", pull_cluster, "--once", "--probes", "5",
                              "--probe", f"aws-dfw={sim.server}"],
                             capture_output=True, text=True, env=env.server.environ(), timeout=60)
    finally:
        sim.latency(f"{AGENT}=0")
    assert out.returncode == 0, out.stderr
    pairs = {m["from"]: m for m in env.http.get("/api/v1/network/status?from=aws-dfw").json()["measurements"]
             if m["to"] == AGENT}
    entry = pairs["aws-dfw"]
    assert entry["source"] == "measured" and entry["lossRatio"] == 0.0 and entry["measuredAt"], entry
    assert abs(entry["rttMs"] - 30.0) <= 6.0 and entry["delayMs"] == entry["rttMs"], entry
    bad = subprocess.run([*drods_command(), "agent", "--cluster", AGENT, "--token", pull_cluster, "--once",
                          "--kubeconfig", str(sim.kubeconfig),
                          "--probe", "aws-dfw"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "NAME=URL" in bad.stderr


def test_a_pull_member_discovers_what_to_measure_from_the_control_plane(env: Env, pull_cluster: str) -> None:
    """Without --probe, the agent measures the other clusters' API endpoints the control plane names."""
    listed = env.http.get("/api/v1/agent/probe-targets", params={"cluster": AGENT}).json()
    urls = {t["name"]: t["url"] for t in listed["targets"] if t["type"] == "Cluster"}
    assert set(urls) == set(env.members) and AGENT not in urls, listed  # every push member, not itself
    other = env.server.token("cluster-agent", cluster="gcp-sin")
    r = env.http.get("/api/v1/agent/probe-targets", params={"cluster": AGENT},
                     headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 403, r.text
    sim = env.members["gcp-sin"].sim
    sim.latency(f"{AGENT}=20±1")
    try:
        def once(*extra: str) -> None:
            out = subprocess.run([*drods_command(), "agent", "--cluster", AGENT, "--token", pull_cluster, "--once",
                                  "--kubeconfig", str(env.members["aws-dfw"].sim.kubeconfig), "--probes", "3",
                                  "--server", env.server.url, *extra],
                                 capture_output=True, text=True, env=env.server.environ(), timeout=60)
            assert out.returncode == 0, out.stderr

        since = time.time()
        once("--no-discover-probes")
        assert not _measured_to_agent(env, since)  # nothing measured: no targets
        once()
    finally:
        sim.latency(f"{AGENT}=0")
    pairs = _measured_to_agent(env, since)
    assert set(pairs) == set(env.members), pairs
    assert abs(pairs["gcp-sin"]["rttMs"] - 20.0) <= 6.0, pairs["gcp-sin"]


def _measured_to_agent(env: Env, since: float) -> dict[str, Any]:
    """The pairs (cluster → the agent's cluster) measured after ``since``."""
    return {m["from"]: m for m in env.http.get("/api/v1/network/status").json()["measurements"]
            if m["to"] == AGENT and m.get("source") == "measured"
            and (parse_rfc3339(m.get("measuredAt")) or 0.0) >= since}
