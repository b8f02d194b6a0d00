"""The README's first steps, as a user types them: ``drods serve`` with no TLS flags serves HTTPS with
the CA it made in its data dir; curl trusts it with ``--cacert``, the CLI and ``drods kubeconfig``
find it in the data dir, kubectl works with nothing else."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from tests.server_process import ServerProcess

CLUSTER = """
apiVersion: multicluster.io/v1alpha1
kind: Cluster
metadata:
  name: first-steps
spec:
  syncMode: Pull
  endpoint: https://k8s.example
"""


def _kubectl(kubectl_path: str, kubeconfig: Path, *args: str, input: str | None = None) -> str:
    done = subprocess.run([kubectl_path, f"--kubeconfig={kubeconfig}", f"--cache-dir={kubeconfig.parent / 'cache'}",
                           *args], capture_output=True, text=True, input=input, timeout=60, check=False,
                          env={**os.environ, "KUBECONFIG": ""})
    assert done.returncode == 0, f"kubectl {args}: {done.stderr}"
    return done.stdout


def test_serve_without_tls_flags_works_with_curl_cli_and_kubectl(tmp_path: Path, kubectl_path: str) -> None:
    data = tmp_path / "drods"
    with ServerProcess(data) as server:
        assert server.url.startswith("https://")
        ca = data / "tls" / "ca.crt"
        assert ca.is_file() and (data / "tls" / "ca.key").stat().st_mode & 0o777 == 0o600
        assert (data / "tls" / "tls.key").stat().st_mode & 0o777 == 0o600
        # Plain HTTP on the TLS port is refused, an unknown CA is refused.
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{server.port}/readyz", timeout=5)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{server.url}/readyz", timeout=5)

        user_env = {"DRODS_DATA_DIR": str(data), "DRODS_SERVER": f"https://127.0.0.1:{server.port}",
                    "DRODS_CA_FILE": ""}
        token = server.run_cli("token", "create", "--role", "admin", env=user_env).stdout.strip()
        curl = subprocess.run(["curl", "-sS", "--cacert", str(ca), "-H", f"Authorization: Bearer {token}",
                               f"{server.url}/api/v1/clusters"], capture_output=True, text=True, timeout=30,
                              check=False)
        assert curl.returncode == 0 and "items" in json.loads(curl.stdout), curl.stderr

        kubeconfig = tmp_path / "drods.kubeconfig"
        made = server.run_cli("kubeconfig", env=user_env)
        assert made.returncode == 0, made.stderr
        kubeconfig.write_text(made.stdout)
        assert "insecure-skip-tls-verify" not in made.stdout and "certificate-authority-data" in made.stdout
        _kubectl(kubectl_path, kubeconfig, "apply", "-f", "-", input=CLUSTER)
        assert "first-steps" in _kubectl(kubectl_path, kubeconfig, "get", "clusters")

        # The drods CLI trusts the data dir's CA without --ca-file.
        got = server.run_cli("get", "clusters", "-o", "json", env={**user_env, "DRODS_TOKEN": token})
        assert got.returncode == 0, got.stderr
        assert "first-steps" in got.stdout

    # A restart with another name keeps the CA (kubeconfigs stay valid) and re-issues the certificate.
    ca_before = ca.read_bytes()
    with ServerProcess(data, args=["--tls-san", "drods.example.test", "--tls-san", "10.9.8.7"], port=server.port):
        cert = x509.load_pem_x509_certificate((data / "tls" / "tls.crt").read_bytes())
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "drods.example.test" in sans.get_values_for_type(x509.DNSName)
        assert "localhost" in sans.get_values_for_type(x509.DNSName)
        assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} >= {"127.0.0.1", "10.9.8.7"}
        assert ca.read_bytes() == ca_before
        assert "first-steps" in _kubectl(kubectl_path, kubeconfig, "get", "clusters")


def test_insecure_http_is_plain_and_explicit(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "plain", tls=False) as server:
        assert server.url.startswith("http://")
        assert httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200
        assert not (tmp_path / "plain" / "tls").exists()
        warned = server.run_cli("kubeconfig", "--server", server.url, "--data-dir", str(tmp_path / "plain"))
        assert warned.returncode == 0 and "only over HTTPS" in warned.stderr
