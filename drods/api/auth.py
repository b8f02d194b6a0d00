"""Bearer-token authentication and role checks (SEC1, API0a).

Tokens are JWTs. By default they are HS256 with a key generated on first start (mode 0600), or
``DRODS_JWT_SECRET`` (at least `MIN_SECRET_BYTES` bytes); RS256 with a public key or a JWKS URL can be
configured for tokens issued elsewhere. Such a token must carry ``exp``, and its ``iss`` and ``aud``
must be the configured issuer and audience (``api.jwtIssuer``, ``api.jwtAudience``; a process with a
public key or JWKS and either unset warns at start: a token another application's identity provider
minted with ``role: admin`` would be accepted).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from drods.errors import ApiError, Forbidden
from drods.keyfile import load_or_create
from drods.model.meta import check_namespace_name
from drods.security import tokens as token_records
from drods.store import Store

log = logging.getLogger("drods.auth")

ISSUER = "drods"
JWKS_TIMEOUT_SECONDS = 5.0  # one fetch of the key set from the JWKS URL
# An HS256 secret shorter than this is refused (RFC 7518 §3.2: the key at least the hash's size).
MIN_SECRET_BYTES = 32
SECRET_ENV = "DRODS_JWT_SECRET"


class Role(enum.StrEnum):
    ADMIN = "admin"
    OPERATOR = "operator"
    VIEWER = "viewer"
    CLUSTER_AGENT = "cluster-agent"


class Action(enum.StrEnum):
    READ = "read"  # get, list, watch
    WRITE = "write"  # create, update, patch, delete objects
    REPORT = "report"  # push metrics and events for one cluster
    ADMIN = "admin"  # audit log and other administrative reads
    WORK = "work"  # list/watch one cluster's Works and report their status (a pull-mode agent, M2)
    READ_SECRETS = "read-secrets"  # see the data of Secrets (and of the Secrets Works carry)


ALLOWED: dict[Role, frozenset[Action]] = {
    Role.ADMIN: frozenset(Action),
    Role.OPERATOR: frozenset({Action.READ, Action.WRITE, Action.REPORT, Action.READ_SECRETS}),
    Role.VIEWER: frozenset({Action.READ}),
    Role.CLUSTER_AGENT: frozenset({Action.REPORT, Action.WORK}),
}


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str
    role: Role
    cluster: str | None = None
    expires: float | None = None
    # Tenancy: a token limited to these namespaces acts on namespaced objects there and nowhere else
    # (None: cluster-wide).
    namespaces: frozenset[str] | None = None
    token_id: str | None = None
    issued_at: float | None = None

    def may(self, action: Action) -> bool:
        return action in ALLOWED[self.role]

    def require(self, action: Action, cluster: str | None = None, namespace: str | None = None) -> None:
        """403 unless the role allows ``action``; a cluster agent acts only for its own cluster; a
        namespaced token only on namespaced objects of its namespaces (``namespace`` None: the request
        is cluster-scoped or spans every namespace)."""
        if action not in ALLOWED[self.role]:
            raise Forbidden(f"role {self.role.value!r} may not {action.value}",
                            {"role": self.role.value, "action": action.value})
        if self.namespaces is not None and (namespace is None or namespace not in self.namespaces):
            allowed = sorted(self.namespaces)
            where = f"namespace {namespace!r}" if namespace else "cluster-scoped objects or all namespaces"
            raise Forbidden(f"this token acts only in namespaces {', '.join(allowed)}, not on {where}; "
                "that needs a cluster-wide token",
                            {"role": self.role.value, "namespaces": allowed, "namespace": namespace})
        if self.role is Role.CLUSTER_AGENT and cluster is not None and cluster != self.cluster:
            raise Forbidden(f"this token may only act for cluster {self.cluster!r}",
                            {"role": self.role.value, "tokenCluster": self.cluster, "cluster": cluster})


class WeakSigningKey(ValueError):
    """The HS256 signing secret is too short to be safe."""


def check_signing_key(key: bytes, source: str) -> bytes:
    if len(key) < MIN_SECRET_BYTES:
        raise WeakSigningKey(f"the JWT signing secret in {source} is {len(key)} bytes; at least {MIN_SECRET_BYTES} "
                             "are required (a short secret can be guessed and any token forged with it): "
                             "e.g. `openssl rand -base64 48`")
    return key


def load_or_create_signing_key(path: Path) -> bytes:
    """The HS256 signing key: ``DRODS_JWT_SECRET``, else the key file (made on first use);
    `WeakSigningKey` when it is shorter than `MIN_SECRET_BYTES`."""
    key = load_or_create(path, SECRET_ENV, lambda: secrets.token_urlsafe(48).encode())
    return check_signing_key(key, SECRET_ENV if os.environ.get(SECRET_ENV) else str(path))


class TokenAuthority:
    """Issues and verifies tokens; verified tokens are cached until they expire (hot path)."""

    _CACHE_MAX = 10_000

    def __init__(
        self,
        hs256_key: bytes,
        *,
        rs256_public_key: str | None = None,
        jwks_url: str | None = None,
        issuer: str | None = None,
        audience: str | None = None,
    ) -> None:
        """``issuer`` and ``audience``: what the ``iss`` and ``aud`` of an RS256 token (one issued
        elsewhere) must be (None: not checked). DRO-DS's own HS256 tokens are always ``iss: drods``
        and carry no audience."""
        self._key = hs256_key
        self._rs_key = rs256_public_key
        # fetched off the event loop (`verify_async`); an unknown key id fetches again at most every 30 s
        self._jwks = jwt.PyJWKClient(jwks_url, timeout=JWKS_TIMEOUT_SECONDS) if jwks_url else None
        self._issuer = issuer
        self._audience = audience
        self._cache: dict[str, Principal] = {}
        # IDs of revoked tokens, kept current from the store (`drods.security.tokens`).
        self.revoked: set[str] = set()
        # Per deleted Cluster, the second before which its agent tokens were issued: refused, recorded or not.
        self.agent_cutoffs: dict[str, int] = {}
        if (rs256_public_key or jwks_url) and not (issuer and audience):
            unset = [name for name, value in (("api.jwtIssuer", issuer), ("api.jwtAudience", audience)) if not value]
            log.warning("RS256 tokens of %s are accepted without %s: any token that key signed is accepted, "
                        "whichever issuer or audience it names (with a shared identity provider: one minted for "
                        "another application); set %s (or --jwt-issuer / --jwt-audience)",
                        "--jwt-public-key" if rs256_public_key else f"the JWKS {jwks_url}", " or ".join(unset),
                        " and ".join(unset))

    def issue(self, role: Role, *, subject: str | None = None, cluster: str | None = None,
              ttl_seconds: int | None = 30 * 24 * 3600, namespaces: list[str] | None = None,
              token_id: str | None = None) -> str:
        if role is Role.CLUSTER_AGENT and not cluster:
            raise ValueError("a cluster-agent token must name its cluster")
        if role is not Role.CLUSTER_AGENT and cluster:
            raise ValueError("only cluster-agent tokens are bound to a cluster")
        if namespaces is not None and role not in (Role.OPERATOR, Role.VIEWER):
            raise ValueError("only operator and viewer tokens may be limited to namespaces")
        if namespaces is not None and not namespaces:
            raise ValueError("a namespaced token needs at least one namespace")
        for ns in namespaces or ():
            check_namespace_name(ns)
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER, "sub": subject or f"{role.value}-{uuid.uuid4().hex[:8]}",
            "role": role.value, "iat": now, "jti": token_id or uuid.uuid4().hex,
        }
        if cluster:
            claims["cluster"] = cluster
        if namespaces is not None:
            claims["namespaces"] = sorted(set(namespaces))
        if ttl_seconds:
            claims["exp"] = now + ttl_seconds
        return jwt.encode(claims, self._key, algorithm="HS256")

    def still_valid(self, principal: Principal) -> bool:
        """The token a request was made with is neither revoked nor expired now: a watch it opened
        ends once it is not (a revoked token must not go on streaming what it could read)."""
        return principal.token_id not in self.revoked and self._cut_off(principal) is None \
            and (principal.expires is None or principal.expires > time.time())

    def _cut_off(self, principal: Principal) -> str | None:
        """Why a cluster agent's token is refused: its Cluster was deleted after it was issued."""
        if principal.cluster is None:
            return None
        cutoff = self.agent_cutoffs.get(principal.cluster)
        if cutoff is None or (principal.issued_at is not None and principal.issued_at >= cutoff):
            return None
        return f"token issued before cluster {principal.cluster!r} was deleted; its agent needs a new one"

    def _refuse_revoked(self, principal: Principal) -> None:
        if principal.token_id in self.revoked:
            raise unauthenticated("token revoked")
        why = self._cut_off(principal)
        if why is not None:
            raise unauthenticated(why)

    def verify(self, token: str) -> Principal:
        """The token's principal; a token signed by a JWKS key may fetch the key set (a blocking
        call: a server verifies with `verify_async`)."""
        cached = self._cached(token)
        return cached if cached is not None else self._verified(token)

    def _verified(self, token: str) -> Principal:
        """A token not in the cache, verified and cached."""
        principal = self._decode(token)
        self._refuse_revoked(principal)
        if len(self._cache) >= self._CACHE_MAX:
            self._cache.clear()
        self._cache[token] = principal
        return principal

    async def verify_async(self, token: str) -> Principal:
        """`verify`, with a token whose key may have to be fetched from the JWKS URL verified in a
        worker thread: an identity provider that is slow or gone (up to the fetch's timeout a time)
        must not hold the event loop, and every request with it."""
        cached = self._cached(token)
        if cached is not None:
            return cached
        if self._jwks is None or self._rs_key is not None:
            return self._verified(token)
        try:
            alg = jwt.get_unverified_header(token).get("alg")
        except jwt.PyJWTError:
            alg = None
        if alg != "RS256":
            return self._verified(token)
        return await asyncio.to_thread(self._verified, token)

    def _cached(self, token: str) -> Principal | None:
        cached = self._cache.get(token)
        if cached is None:
            return None
        self._refuse_revoked(cached)
        if cached.expires is None or cached.expires > time.time():
            return cached
        self._cache.pop(token, None)
        return None

    def _decode(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
            alg = header.get("alg")
            if alg == "HS256":
                claims = jwt.decode(token, self._key, algorithms=["HS256"], issuer=ISSUER,
                                    options={"require": ["sub", "iat"], "verify_aud": False})
            elif alg == "RS256" and (self._rs_key or self._jwks):
                # issued elsewhere: it must expire (nothing here can revoke it by ID), and name this
                # deployment as its audience and the configured identity provider as its issuer
                key: Any = self._rs_key or self._jwks.get_signing_key_from_jwt(token).key  # type: ignore[union-attr]
                required = ["sub", "iat", "exp", *(["iss"] if self._issuer else []),
                            *(["aud"] if self._audience else [])]
                claims = jwt.decode(token, key, algorithms=["RS256"], audience=self._audience, issuer=self._issuer,
                                    options={"require": required, "verify_aud": self._audience is not None})
            else:
                raise jwt.InvalidAlgorithmError(f"algorithm {alg!r} not accepted")
        except jwt.ExpiredSignatureError as e:
            raise unauthenticated("token expired") from e
        except jwt.PyJWTError as e:
            raise unauthenticated(f"invalid token: {e}") from e
        try:
            role = Role(claims.get("role", ""))
        except ValueError as e:
            raise unauthenticated(f"token has unknown role {claims.get('role')!r}") from e
        cluster = claims.get("cluster")
        if role is Role.CLUSTER_AGENT and not cluster:
            raise unauthenticated("cluster-agent token without a cluster claim")
        exp = claims.get("exp")
        namespaces = claims.get("namespaces")
        if namespaces is not None and (not isinstance(namespaces, list) or not namespaces
                                       or not all(isinstance(n, str) for n in namespaces)):
            raise unauthenticated("token has a malformed namespaces claim")
        jti = claims.get("jti")
        return Principal(str(claims["sub"]), role, cluster, float(exp) if exp is not None else None,
                         frozenset(namespaces) if namespaces is not None else None,
                         str(jti) if jti is not None else None, float(claims["iat"]))


def unauthenticated(message: str) -> ApiError:
    return ApiError(401, "UNAUTHENTICATED", message, {})


def bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise unauthenticated("missing Authorization: Bearer <token>")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthenticated("Authorization header must be 'Bearer <token>'")
    return token.strip()


async def issue_recorded(authority: TokenAuthority, store: Store, role: Role, *, subject: str | None = None,
                         cluster: str | None = None, ttl_seconds: int | None = 30 * 24 * 3600,
                         namespaces: list[str] | None = None,
                         audit: token_records.AuditWrites | None = None) -> str:
    """Sign a token and record it (ID, subject, role, cluster, namespaces, expiry) in ``store`` — with
    its audit record (``audit``) in the same transaction; the token is returned only once its record is
    written (a ``ValueError`` for claims that do not go together)."""
    token = authority.issue(role, subject=subject, cluster=cluster, ttl_seconds=ttl_seconds, namespaces=namespaces)
    p = authority.verify(token)
    assert p.token_id is not None
    now = time.time()
    rec = token_records.TokenRecord(p.token_id, p.subject, p.role.value, now, p.expires, p.cluster,
                                    tuple(sorted(p.namespaces)) if p.namespaces else None)
    await token_records.record(store, rec, audit)
    return token


async def cluster_removed(authority: TokenAuthority, store: Store, cluster: str) -> list[str]:
    """A Cluster was deleted: its cluster-agent tokens are revoked (a cluster registered again under
    the same name must not accept them) — refused by this server at once, by the others as they
    follow the records — and noted among the changes of the request being served (its audit
    record). Those issued before now with no record are refused too (the cutoff). The IDs revoked."""
    from drods.api.audit import token_change
    from drods.registry import changes

    authority.agent_cutoffs[cluster] = await token_records.cut_off_cluster_agents(store, cluster)
    revoked = await token_records.revoke_cluster_agents(store, cluster)
    recorder = changes.CURRENT.get()
    for rec in revoked:
        authority.revoked.add(rec.id)
        if recorder is not None:
            recorder.changes.append(token_change("revoke", rec))
    return [rec.id for rec in revoked]
