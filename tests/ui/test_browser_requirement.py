"""Without chromium the browser tests skip — unless DRODS_REQUIRE_CHROMIUM says it must be there (CI)."""

from __future__ import annotations

import pytest

from tests.ui_e2e import conftest as ui


def test_missing_chromium_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ui, "chromium_path", lambda: None)
    monkeypatch.delenv("DRODS_REQUIRE_CHROMIUM", raising=False)
    with pytest.raises(pytest.skip.Exception):
        ui._require_browser()


def test_missing_chromium_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ui, "chromium_path", lambda: None)
    monkeypatch.setenv("DRODS_REQUIRE_CHROMIUM", "1")
    with pytest.raises(pytest.fail.Exception, match="DRODS_REQUIRE_CHROMIUM"):
        ui._require_browser()


def test_present_chromium_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ui, "chromium_path", lambda: "/opt/chromium")
    assert ui._require_browser() == "/opt/chromium"
