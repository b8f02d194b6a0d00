"""The dashboard in a real browser: Debian's chromium driven by Playwright (never ``playwright
install``), against a real ``drods serve`` with three ``drods sim`` members joined in push mode.

The browser tests skip only when chromium (or Playwright) is missing and ``DRODS_REQUIRE_CHROMIUM``
is unset; CI sets it, so a missing browser fails there. Screenshots go to ``screenshots/`` here
(git-ignored) for a reviewer to look at."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config as k8s_config

from drods.sim.harness import SimProcess
from tests.members_e2e.conftest import FAST, SIMS, SPREAD_PROFILE, Env, Member, wait_for
from tests.server_process import ServerProcess

SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _require_browser() -> str:
    path = chromium_path()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
    if path is None:
        if os.environ.get("DRODS_REQUIRE_CHROMIUM"):
            pytest.fail("DRODS_REQUIRE_CHROMIUM is set but chromium or Playwright for Python is missing")
        pytest.skip("chromium or Playwright for Python not installed")
    return path


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    executable = _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def cli_tls(server: ServerProcess) -> list[str]:
    """The server's address (and CA, when it speaks TLS) for ``drods`` CLI calls."""
    args = ["--server", server.url, "--token", server.token("admin")]
    if server.cert is not None:
        args += ["--ca-file", str(server.cert)]
    return args


@pytest.fixture(scope="package")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """A control plane and three sims (as in the member tests), every member Ready."""
    import httpx

    root = tmp_path_factory.mktemp("ui-e2e")
    sims = {n: SimProcess(n, root / "sims", args).start() for n, args in SIMS.items()}
    data = root / "server"
    data.mkdir()
    (data / "members.yaml").write_text(FAST)
    (data / "scheduler-profile.yaml").write_text(SPREAD_PROFILE)
    server = ServerProcess(data)
    try:
        server.start()
        for s in sims.values():
            s.wait_ready(60)
        for n, s in sims.items():
            done = server.run_cli("cluster", "join", n, "--kubeconfig", str(s.kubeconfig), *cli_tls(server))
            assert done.returncode == 0, done.stderr
        members = {n: Member(n, s, k8s_config.new_client_from_config(str(s.kubeconfig), persist_config=False))
                   for n, s in sims.items()}
        http = httpx.Client(base_url=server.url, verify=server.verify, timeout=10,
                            headers={"Authorization": f"Bearer {server.token('admin')}"})
        with http:
            e = Env(server, http, members)
            wait_for(lambda: all(e.ready(n) == "True" for n in sims), 30, "every member Ready")
            yield e
    finally:
        server.stop(check=False)
        for s in sims.values():
            with contextlib.suppress(Exception):
                s.stop()


@dataclass
class Browse:
    """Opens the dashboard as one role: a fresh browser context (its own sessionStorage) per call."""

    browser: Any
    server: ServerProcess

    def login(self, role: str, *, subject: str | None = None) -> Any:
        context = self.browser.new_context(viewport={"width": 1280, "height": 800},
                                           ignore_https_errors=self.server.cert is not None)
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{self.server.url}/ui/")
        page.get_by_label("Access token").fill(self.server.token(role, subject=subject))
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("heading", name="Fleet").wait_for()
        return page


@pytest.fixture(scope="package")
def browse(browser: Any, env: Env) -> Browse:
    return Browse(browser, env.server)


def shot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
