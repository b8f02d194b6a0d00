"""A CA and a serving certificate in a directory, made once and reused: the control plane serves
HTTPS out of the box (kubectl sends bearer tokens only over TLS), and so does every ``drods sim``.

The CA key is kept (0600) beside the CA so that a serving certificate whose names no longer cover
the server's (a new ``--host`` or ``--tls-san``) is re-issued by the same CA: kubeconfigs and CA
files already handed out stay valid.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=3650)


@dataclass(frozen=True)
class Certs:
    ca: Path
    cert: Path
    key: Path

    @property
    def ca_key(self) -> Path:
        return self.ca.with_name("ca.key")


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


class UnusableServingPair(ValueError):
    """A ``--tls-cert``/``--tls-key`` pair a server could not serve with; ``flag`` names the option at fault."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag


def check_serving_pair(cert: str | None, key: str | None) -> None:
    """The pair loads as a server's (both given, present, PEM, the key the certificate's), checked before
    anything starts: else the server died at its first bind with a bare ``ssl.SSLError``."""
    if bool(cert) != bool(key):
        raise UnusableServingPair("--tls-cert", "--tls-cert and --tls-key go together")
    if not cert or not key:
        return
    for flag, file in (("--tls-cert", cert), ("--tls-key", key)):
        if not Path(file).is_file():
            raise UnusableServingPair(flag, f"{file}: no such file")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as e:
        why = "the key is not the certificate's" if "KEY_VALUES_MISMATCH" in str(e) \
            else f"not a PEM certificate and its private key ({e.reason or e})"
        raise UnusableServingPair("--tls-key", f"{cert} with {key}: {why}") from e
    except OSError as e:
        raise UnusableServingPair("--tls-cert", f"{cert} with {key}: {e.strerror or e}") from e


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def subject_names(host: str, extra: Iterable[str] = ()) -> list[x509.GeneralName]:
    """localhost, 127.0.0.1, this machine's name, the bind address (unless a wildcard) and ``extra``."""
    wanted = ["localhost", "127.0.0.1"]
    hostname = socket.gethostname()
    if hostname and hostname != "localhost":
        wanted.append(hostname)
    if host not in ("0.0.0.0", "::", ""):
        wanted.append(host)
    wanted += [e for e in extra if e]
    names: list[x509.GeneralName] = []
    for n in wanted:
        g = _general_name(n)
        if g not in names:
            names.append(g)
    return names


def _covers(cert_path: Path, names: list[x509.GeneralName]) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        have = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    if cert.not_valid_after_utc < dt.datetime.now(dt.UTC) + dt.timedelta(days=1):
        return False
    return all(n in have for n in names)


def _new_ca(certs: Certs, name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + VALIDITY)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    _write(certs.ca_key, ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()), 0o600)
    _write(certs.ca, ca.public_bytes(pem))
    return ca_key, ca


def _load_ca(certs: Certs) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None:
    try:
        key = serialization.load_pem_private_key(certs.ca_key.read_bytes(), password=None)
        ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    except (OSError, ValueError):
        return None
    return (key, ca) if isinstance(key, ec.EllipticCurvePrivateKey) else None


def ensure_certs(directory: Path, name: str, host: str, extra_sans: Iterable[str] = ()) -> Certs:
    """``ca.crt``, ``tls.crt`` and ``tls.key`` in ``directory``: reused while the serving certificate
    covers ``host`` and ``extra_sans``, else re-issued (by the same CA when its key is there)."""
    certs = Certs(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    names = subject_names(host, extra_sans)
    if certs.ca.exists() and certs.key.exists() and _covers(certs.cert, names):
        return certs
    directory.mkdir(parents=True, exist_ok=True)
    loaded = _load_ca(certs)
    ca_key, ca = loaded if loaded is not None else _new_ca(certs, name)
    key, cert = _leaf(ca_key, ca, name, ExtendedKeyUsageOID.SERVER_AUTH, names)
    pem = serialization.Encoding.PEM
    _write(certs.key, key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()), 0o600)
    _write(certs.cert, cert.public_bytes(pem))
    return certs


def _leaf(ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, name: str, usage: x509.ObjectIdentifier,
          sans: list[x509.GeneralName] | None = None) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new key and a certificate for it (CN ``name``, for ``usage``) signed by the CA."""
    now = dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
               .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False))
    if sans is not None:
        builder = (builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    return key, builder.sign(ca_key, hashes.SHA256())


def issue_client_cert(directory: Path, name: str) -> tuple[Path, Path]:
    """A client certificate (CN ``name``) signed by the CA in ``directory`` — for stores and peers
    that authenticate clients by certificate (etcd's ``--client-cert-auth``). Returns (cert, key)."""
    certs = Certs(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")
    loaded = _load_ca(certs)
    if loaded is None:
        raise FileNotFoundError(f"no CA key in {directory} (make the CA first with ensure_certs)")
    ca_key, ca = loaded
    key, cert = _leaf(ca_key, ca, name, ExtendedKeyUsageOID.CLIENT_AUTH)
    pem = serialization.Encoding.PEM
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    _write(key_path, key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()), 0o600)
    _write(cert_path, cert.public_bytes(pem))
    return cert_path, key_path
