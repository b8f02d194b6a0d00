"""A server command given a store URL no store takes, or a certificate file that is not there, stops with
a usage error before it records or starts anything (walkthrough AR: a traceback, and a recorded
``store.url`` that broke ``drods token`` afterwards)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from drods.cli.main import app
from drods.security.tls import ensure_certs
from drods.store import SERVED_STORE_FILE


@pytest.mark.parametrize("command", [["apiserver"], ["scheduler"], ["controllers"], ["serve"]])
def test_a_bad_store_url_is_a_usage_error_and_records_nothing(command: list[str], tmp_path: Path) -> None:
    r = CliRunner().invoke(app, [*command, "--store", "etcdd://127.0.0.1:2379", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert "unknown store URL 'etcdd://127.0.0.1:2379'" in r.output and "Traceback" not in r.output
    assert not (tmp_path / SERVED_STORE_FILE).exists()


def test_token_commands_refuse_a_bad_store_url_too(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["token", "list", "--store", "etcd://", "--data-dir", str(tmp_path)])
    assert r.exit_code == 2 and "at least one host:port" in r.output, r.output


def test_a_missing_certificate_file_is_named(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["apiserver", "--tls-cert", str(tmp_path / "nope.crt"), "--tls-key",
                                 str(tmp_path / "nope.key"), "--data-dir", str(tmp_path)],
                           env={"COLUMNS": "400"})
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and "--tls-cert" in said and "nope.crt: no such file" in said, r.output


@pytest.mark.parametrize("command", [["serve"], ["apiserver"]])
def test_a_certificate_and_key_that_do_not_belong_together_are_a_usage_error(command: list[str],
                                                                             tmp_path: Path) -> None:
    """Before, the server died at its first bind with a bare ``ssl.SSLError`` traceback."""
    one, other = ensure_certs(tmp_path / "one", "drods", "localhost"), ensure_certs(tmp_path / "two", "drods", "x")
    (tmp_path / "junk.key").write_text("not a key\n")
    data = tmp_path / "data"
    for key, expected in ((other.key, "the key is not the certificate's"),
                          (tmp_path / "junk.key", "not a PEM certificate and its private key")):
        r = CliRunner().invoke(app, [*command, "--tls-cert", str(one.cert), "--tls-key", str(key),
                                     "--data-dir", str(data)], env={"COLUMNS": "400"})
        said = " ".join(r.output.split())
        assert r.exit_code == 2 and "--tls-key" in said and expected in said, r.output
        assert "Traceback" not in r.output and not (data / SERVED_STORE_FILE).exists()
