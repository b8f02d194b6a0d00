"""`MemberClient`: everything DRO-DS does to one member cluster, through the official Kubernetes client.

The official client is synchronous, so each cluster gets its own small thread pool and a call
window of at most the same size that halves when the member times out and grows back as it answers
(`drods.members.pacing`; bounded concurrency per cluster: a cluster that hangs ties up only its own
threads, SEC4). Every HTTP call has a connect and a read timeout. Where the member serves a kind is
its discovery, read one group-version at a time (`drods.members.discovery`). Transient failures
(connection refused/reset, timeouts, 429/5xx) are retried with jittered exponential backoff.
The client keeps the cluster's connection state (Ready / NotReady, last error, consecutive
failures); while NotReady, calls fail fast with `MemberUnavailable` except one probe per
``probe_interval``, so work for a dead cluster doesn't pile up behind timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import random
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from pathlib import Path
from typing import Any, Literal, TypeVar

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from drods.machinery.fence import WritesRefused
from drods.members.discovery import PODS, KindNotServed, MemberDiscovery, ServedResource
from drods.members.foreign_names import MAX_KINDS as FOREIGN_KINDS
from drods.members.foreign_names import ForeignNames
from drods.members.pacing import CallWindow, overloaded
from drods.members.pod_cache import PodCache
from drods.members.summary import ClusterSummary, summarise
from drods.members.traffic import Sample, TrafficMeter, node_sample
from drods.model import jsondoc
from drods.model.dispatch import preserved, release_patch

T = TypeVar("T")
Obj = dict[str, Any]
TRANSIENT_STATUS = frozenset({0, 429, 500, 502, 503, 504})
# threads beyond ``concurrency`` for watches, each held while it follows: the pod cache's, the kinds a
# pull agent follows its copies of (or the work-status controller's), and the foreign names' kinds
COPY_WATCHES = 2
WATCH_THREADS = 1 + COPY_WATCHES + FOREIGN_KINDS
CREDENTIALS_CHECK_SECONDS = 1.0  # a kubeconfig's token checked for expiry at most this often


WATCH_CONNECTIONS = 4  # pooled connections kept beside the calls' for watches in flight


@dataclass(frozen=True)
class MemberOptions:
    connect_timeout: float = 3.0  # seconds, per HTTP call
    read_timeout: float = 10.0  # seconds, per HTTP call
    retries: int = 2  # further attempts after a transient failure
    backoff: float = 0.2  # first retry delay; doubles each time, with jitter
    backoff_max: float = 5.0
    concurrency: int = 4  # threads and pooled connections for this cluster
    failure_threshold: int = 3  # consecutive failed attempts before the cluster is NotReady
    probe_interval: float = 5.0  # while NotReady, let one call through this often
    field_manager: str = "drods"
    page_size: int = 500  # list pagination
    node_stats_per_summary: int = 5  # kubelet stats summaries read per resource summary, in turn (0: all)
    # asked just before each write (not a read) is sent: False refuses it (`WritesRefused`) — a leader
    # whose lease may have expired writes nothing to a member (`drods.machinery.leader`)
    may_write: Callable[[], bool] | None = field(default=None, compare=False)

    @property
    def timeout(self) -> tuple[float, float]:
        return (self.connect_timeout, self.read_timeout)


@dataclass(frozen=True)
class ConnectionState:
    condition: Literal["Ready", "NotReady", "Unknown"]
    consecutive_failures: int
    last_error: str | None
    last_success: float | None  # epoch seconds
    last_failure: float | None
    latency_ms: float | None  # of the last successful call

    @property
    def ready(self) -> bool:
        return self.condition == "Ready"


class _Heard:
    """Whether, and when, bytes of the member's answer to one call arrived (set in the call's thread)."""

    __slots__ = ("at", "stream")

    def __init__(self) -> None:
        self.at: float | None = None  # epoch seconds: the last bytes heard
        self.stream = False  # a watch: ``at`` is its last line or its end, not the call's


class MemberError(Exception):
    """The cluster answered with an error that retrying won't fix (403, 409, 422, …)."""

    def __init__(self, cluster: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{cluster}: {status} {reason}: {message}")
        self.cluster = cluster
        self.status = status
        self.reason = reason
        self.message = message


# a member's refusal that the same apply will meet again; a 409 is not one: with conflicts forced,
# an apply meets one only when a concurrent write won (Kubernetes clients retry on conflict)
PERMANENT_STATUS = frozenset({400, 401, 403, 404, 405, 413, 415, 422})


class WatchExpired(Exception):
    """The cluster ended a watch with an error (410 Gone: its history is compacted): list again."""

    def __init__(self, cluster: str, message: str) -> None:
        super().__init__(f"{cluster}: {message}")
        self.cluster = cluster


def history_gone(exc: BaseException) -> bool:
    """Whether a failed watch says the member no longer has the history asked for (410): list again."""
    return isinstance(exc, WatchExpired) or (isinstance(exc, MemberError) and exc.status == HTTPStatus.GONE)


class MemberUnavailable(Exception):
    """The cluster could not be reached (after retries), or is NotReady and the call failed fast."""

    def __init__(self, cluster: str, message: str) -> None:
        super().__init__(f"{cluster}: {message}")
        self.cluster = cluster


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return int(exc.status or 0) in TRANSIENT_STATUS
    return isinstance(exc, urllib3.exceptions.HTTPError | OSError | TimeoutError)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def _api_message(exc: ApiException) -> str:
    try:
        body = jsondoc.loads(exc.body or b"{}")
    except (ValueError, TypeError):
        return str(exc.reason or "")
    return str(body.get("message") or exc.reason or "") if isinstance(body, dict) else str(exc.reason or "")


def _with_default_timeout(api: k8s.ApiClient, timeout: tuple[float, float]) -> None:
    """Give every request of this ApiClient a timeout unless the caller set one: a call without one
    waits forever on a partitioned cluster."""
    rest = api.rest_client
    inner: Any = rest.request

    def request(method: str, url: str, **kwargs: Any) -> Any:
        kwargs["_request_timeout"] = kwargs.get("_request_timeout") or timeout
        return inner(method, url, **kwargs)

    setattr(rest, "request", request)  # noqa: B010 - an instance attribute shadows the method


def with_credentials_checked_every(cfg: k8s.Configuration, seconds: float) -> None:
    """Check a kubeconfig's credentials for expiry at most every ``seconds``, not at every request.

    The kubeconfig loader's hook runs before each request; it sets the host again, whose setter
    reads the environment's proxies (~0.4 ms of CPU a call, as much as the rest of a GET's client
    side). The loader already treats a token as expired five minutes early, so a second's delay
    refreshes nothing late. The hook installs a new hook each time it runs: the wrapper takes that
    one for its next check and stays in place."""
    conf: Any = cfg  # the client types the hook as None
    hook: Callable[[k8s.Configuration], None] | None = conf.refresh_api_key_hook
    if hook is None:
        return
    lock = threading.Lock()
    checked = -seconds

    def check(c: k8s.Configuration) -> None:
        nonlocal hook, checked
        with lock:
            now = time.monotonic()
            if hook is None or now - checked < seconds:
                return
            checked = now
            try:
                hook(c)
            finally:
                installed: Any = c
                if installed.refresh_api_key_hook is not check:
                    hook = installed.refresh_api_key_hook
                    installed.refresh_api_key_hook = check

    conf.refresh_api_key_hook = check


class MemberClient:
    """One member cluster. Build it with `from_kubeconfig` or `from_endpoint`; no I/O happens
    until the first call. All operations are coroutines; `close()` when done."""

    def __init__(self, name: str, configure: Callable[[k8s.Configuration], None],
                 options: MemberOptions | None = None, *, cleanup: list[Path] | None = None) -> None:
        self.name = name
        self.options = options or MemberOptions()
        self._configure = configure
        self._cleanup = cleanup or []
        # the call window bounds the paced calls to ``concurrency``; watches are not paced and hold a
        # thread each for as long as they follow (threads start only when needed)
        self._pool = ThreadPoolExecutor(max_workers=self.options.concurrency + WATCH_THREADS,
                                        thread_name_prefix=f"member-{name}")
        # Per event loop (asyncio primitives belong to one loop; tests and tools may use several).
        self._windows: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CallWindow] = (
            weakref.WeakKeyDictionary())
        self._lock = threading.Lock()
        self._api: k8s.ApiClient | None = None
        self._discovery = MemberDiscovery(self._get_or_none)
        self._state = ConnectionState("Unknown", 0, None, None, None, None)
        self._call_of_thread = threading.local()  # the `_Heard` of the call a worker thread runs
        self._closed = False
        self._watches: set[Any] = set()  # responses of watches in flight: cut by close()
        self._pod_cache: PodCache | None = None  # `follow_pods`
        self._foreign: ForeignNames | None = None  # `foreign_names`
        self.traffic = TrafficMeter(self.options.node_stats_per_summary)  # the nodes' network counters

    # ---- construction ------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(cls, name: str, kubeconfig: str | Path | Mapping[str, Any], context: str | None = None,
                        options: MemberOptions | None = None) -> MemberClient:
        """From a kubeconfig file path or an already-parsed kubeconfig (e.g. a Cluster's credentials)."""
        if isinstance(kubeconfig, Mapping):
            doc = copy.deepcopy(dict(kubeconfig))

            def configure(cfg: k8s.Configuration) -> None:
                k8s_config.load_kube_config_from_dict(doc, context=context, client_configuration=cfg,
                                                      persist_config=False)
        else:
            path = str(kubeconfig)

            def configure(cfg: k8s.Configuration) -> None:
                k8s_config.load_kube_config(path, context=context, client_configuration=cfg, persist_config=False)

        return cls(name, configure, options)

    @classmethod
    def from_endpoint(cls, name: str, endpoint: str, token: str | None = None, *,
                      ca_cert: str | bytes | Path | None = None, insecure_skip_verify: bool = False,
                      options: MemberOptions | None = None) -> MemberClient:
        """From an API server URL and a bearer token; ``ca_cert`` is a PEM (text/bytes) or a file."""
        cleanup: list[Path] = []
        ca_file: str | None = None
        if isinstance(ca_cert, Path):
            ca_file = str(ca_cert)
        elif ca_cert:
            pem = ca_cert.encode() if isinstance(ca_cert, str) else ca_cert
            fd, tmp = tempfile.mkstemp(prefix=f"drods-{name}-", suffix=".crt")
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
            ca_file = tmp
            cleanup.append(Path(tmp))

        def configure(cfg: k8s.Configuration) -> None:
            cfg.host = endpoint.rstrip("/")
            if token:
                cfg.api_key = {"authorization": token}
                cfg.api_key_prefix = {"authorization": "Bearer"}
            cfg.verify_ssl = not insecure_skip_verify
            if ca_file:
                cfg.ssl_ca_cert = ca_file

        return cls(name, configure, options, cleanup=cleanup)

    def _client(self) -> k8s.ApiClient:
        """Built on first use, in a worker thread (kubeconfig exec plugins do I/O)."""
        with self._lock:
            if self._api is None:
                cfg = k8s.Configuration()
                self._configure(cfg)
                with_credentials_checked_every(cfg, CREDENTIALS_CHECK_SECONDS)
                cfg.retries = False  # retries are ours, with backoff and state
                # the calls' threads and the long-lived watches (pods, resources) each hold a connection:
                # a pool of the calls' size alone warned "Connection pool is full" on every watch's return
                cfg.connection_pool_maxsize = self.options.concurrency + WATCH_CONNECTIONS
                api = k8s.ApiClient(cfg)
                _with_default_timeout(api, self.options.timeout)
                self._api = api
            return self._api

    # ---- state and the call path -------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._state

    def _succeeded(self, latency: float, at: float) -> None:
        """The member answered, its last bytes heard ``at``: ``last_success`` (what the health check takes
        for a probe's answer) only ever moves forward."""
        last = max(self._state.last_success or at, at)
        self._state = replace(self._state, condition="Ready", consecutive_failures=0, last_success=last,
                              latency_ms=round(latency * 1000, 2))

    def _heard(self, *, stream: bool = False) -> None:
        """Bytes of the member's answer arrived (a response's status line and headers, a watch's line or
        the end of its stream): in the thread of the call that sent the request, which `_call` then counts
        as an answer. A call that heard nothing — served from a cache (discovery, the pods followed),
        refused before it was sent, or left hanging by a partition — says nothing of the member: it
        must not stand for a probe, nor turn a member that answers nobody Ready again."""
        heard: _Heard | None = getattr(self._call_of_thread, "heard", None)
        if heard is not None:
            heard.at = time.time()
            heard.stream = heard.stream or stream

    def _failed(self, exc: BaseException) -> None:
        failures = self._state.consecutive_failures + 1
        ready = failures < self.options.failure_threshold and self._state.condition != "NotReady"
        self._state = replace(self._state, condition="Ready" if ready else "NotReady", consecutive_failures=failures,
                              last_error=_describe(exc), last_failure=time.time())

    def _gate(self, probe: bool) -> None:
        st = self._state
        if probe or st.condition != "NotReady" or st.last_failure is None:
            return
        wait = st.last_failure + self.options.probe_interval - time.time()
        if wait > 0:
            raise MemberUnavailable(self.name, f"NotReady ({st.last_error}); next probe in {wait:.1f}s")

    async def _call(self, fn: Callable[[], T], *, probe: bool = False, retry: bool = True,
                    paced: bool = True) -> T:
        """``fn`` in the cluster's threads, within its call window (`drods.members.pacing`) unless
        ``paced`` is False (a watch: it holds its call open for as long as it follows) or it is the
        health ``probe`` (whether the member answers, not how much it is being sent)."""
        if self._closed:
            raise MemberUnavailable(self.name, "client is closed")
        self._gate(probe)
        loop = asyncio.get_running_loop()
        window = self._windows.get(loop)
        if window is None:
            window = self._windows[loop] = CallWindow(self.options.concurrency)
        attempt = 0
        entered = time.time()
        while True:
            async with window if paced and not probe else contextlib.nullcontext():
                st = self._state
                if not probe and st.condition == "NotReady" and (st.last_failure or 0) > entered:
                    # it went down while this call waited for a thread: don't queue another timeout
                    raise MemberUnavailable(self.name, f"NotReady ({st.last_error})")
                started = time.monotonic()
                heard = _Heard()
                try:
                    result = await loop.run_in_executor(self._pool, self._hearing(fn, heard))
                except WritesRefused:
                    raise  # never sent: it says nothing of the member
                except Exception as exc:
                    if overloaded(exc):
                        window.overloaded()
                    if not is_transient(exc):
                        # an answer (403, 404, 409, 422, …) says the member is reachable; an error raised
                        # with nothing heard (a kind the cached discovery does not know, a document
                        # refused here) says nothing of it either way
                        self._answered(window, heard, started)
                        if isinstance(exc, ApiException):
                            raise MemberError(self.name, int(exc.status or 0), str(exc.reason or ""),
                                              _api_message(exc)) from exc
                        raise
                    self._failed(exc)
                    failure = exc
                else:
                    self._answered(window, heard, started)
                    return result
            if not retry or attempt >= self.options.retries or (self._state.condition == "NotReady" and not probe):
                raise MemberUnavailable(self.name, _describe(failure)) from failure
            delay = min(self.options.backoff_max, self.options.backoff * 2**attempt)
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            attempt += 1

    def _hearing(self, fn: Callable[[], T], heard: _Heard) -> Callable[[], T]:
        """``fn``, noting in ``heard`` what of the member's answer its thread hears (`_heard`)."""
        def run() -> T:
            self._call_of_thread.heard = heard
            try:
                return fn()
            finally:
                self._call_of_thread.heard = None
        return run

    def _answered(self, window: CallWindow, heard: _Heard, started: float) -> None:
        """A call ended without a transient failure: a success of the member's if it heard the member's
        answer — when its last bytes arrived (a request's answer read to its end by now; a watch's last
        line or the end of its stream, not the end of a stream cut here) — else nothing of the member's."""
        if heard.at is None:
            return
        window.answered()
        self._succeeded(time.monotonic() - started, heard.at if heard.stream else time.time())

    # ---- raw requests (run in the cluster's threads) ---------------------------------------------

    def _request(self, method: str, path: str, *, query: list[tuple[str, Any]] | None = None, body: Any = None,
                 content_type: str = "application/json", timeout: tuple[float, float] | None = None) -> Any:
        """The member's answer, whatever its status (the client's `RESTResponse`, its body not read). A
        write is first allowed by ``options.may_write``, here in the thread, as late as it can be asked."""
        if method != "GET" and self.options.may_write is not None and not self.options.may_write():
            raise WritesRefused(f"{method} {path} to {self.name} not sent: this process's leadership may have lapsed")
        api = self._client()
        req = api.param_serialize(method, path, query_params=list(query or []), body=body,
                                  header_params={"Accept": "application/json", "Content-Type": content_type},
                                  auth_settings=["BearerToken"])
        resp = api.call_api(*req, _request_timeout=timeout)
        self._heard()  # its status line and headers arrived
        return resp

    def _raise_for(self, resp: Any) -> None:
        """Raise the client's `ApiException` for an answer that is not 2xx (its body read already)."""
        if not 200 <= resp.status <= 299:
            self._client().response_deserialize(resp, {})

    def _send(self, method: str, path: str, *, query: list[tuple[str, Any]] | None = None, body: Any = None,
              content_type: str = "application/json", timeout: tuple[float, float] | None = None) -> Any:
        """The member's answer (a urllib3 response, its body not read yet when it succeeded); any
        other status than 2xx raises the client's `ApiException`."""
        resp = self._request(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            self._raise_for(resp)
        return resp.response

    def _get_json(self, path: str, query: list[tuple[str, Any]] | None = None) -> Any:
        return jsondoc.loads(self._send("GET", path, query=query).data)

    def _get_or_none(self, path: str) -> Obj | None:
        """GET ``path``, None on a 404 (a first contact's 404 is an answer, not an error: no exception
        is made of it)."""
        resp = self._request("GET", path)
        body = resp.read()  # always: it gives the connection back to the pool
        if resp.status == HTTPStatus.NOT_FOUND:
            return None
        self._raise_for(resp)
        return dict(jsondoc.loads(body))

    def _list_all(self, path: str) -> list[Obj]:
        return self._list_versioned(path)[0]

    def _list_versioned(self, path: str, label_selector: str | None = None) -> tuple[list[Obj], str]:
        """Every item, page by page, and the list's resourceVersion (where a watch starts)."""
        items: list[Obj] = []
        token: str | None = None
        while True:
            query: list[tuple[str, Any]] = [("limit", self.options.page_size)]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            page = self._get_json(path, query)
            items += page.get("items") or []
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    def _resource(self, api_version: str, kind: str) -> ServedResource:
        return self._discovery.resource(api_version, kind)

    # ---- operations --------------------------------------------------------------------------

    async def probe(self) -> str:
        """GET /version, always sent (even while NotReady): the health check."""
        return await self._call(self._version, probe=True)

    async def version(self) -> str:
        return await self._call(self._version)

    def _version(self) -> str:
        return str(self._get_json("/version").get("gitVersion", ""))

    async def apply(self, manifest: Mapping[str, Any]) -> Obj:
        """Server-side apply (create or update; our field manager, conflicts forced). Returns the
        object as the cluster stored it. Namespaced objects default to ``default``."""
        meta = dict(manifest.get("metadata") or {})
        if not meta.get("name"):
            raise ValueError("manifest needs metadata.name")

        def run() -> Obj:
            res = self._resource(str(manifest.get("apiVersion")), str(manifest.get("kind")))
            ns = (meta.get("namespace") or "default") if res.namespaced else None
            body = {**manifest, "metadata": {**meta, "namespace": ns} if ns else meta}
            # sent as JSON bytes (JSON is YAML): the client's own serialisation of a document walks
            # every value in Python (~0.25 ms an apply)
            try:
                out = self._send("PATCH", res.item(meta["name"], ns), body=jsondoc.dumps(body),
                                 content_type="application/apply-patch+yaml",
                                 query=[("fieldManager", self.options.field_manager), ("force", True)])
            except ApiException as e:
                if e.status == HTTPStatus.NOT_FOUND:  # an apply creates: the kind's path is gone
                    self._discovery.forget(res.api_version)
                raise
            return dict(jsondoc.loads(out.data))

        return await self._call(self._translate_missing_kind(run))

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete (dependents in the background); False if it was not there. Idempotent."""
        return await self._to_item("DELETE", api_version, kind, name, namespace, {"propagationPolicy": "Background"})

    async def release(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Hand an object over to the member (``preserveResourcesOnDeletion``): DRO-DS's ownership labels
        and annotations removed by a merge patch, the object kept; False if it was not there."""
        return await self._to_item("PATCH", api_version, kind, name, namespace, release_patch(),
                                   "application/merge-patch+json")

    async def _to_item(self, method: str, api_version: str, kind: str, name: str, namespace: str | None,
                       body: Any, content_type: str = "application/json") -> bool:
        """``method`` on one object (namespaced ones default to ``default``); False if it was not there."""
        def run() -> bool:
            res = self._resource(api_version, kind)
            ns = (namespace or "default") if res.namespaced else None
            try:
                self._send(method, res.item(name, ns), body=body, content_type=content_type).read()
            except ApiException as e:
                if e.status == HTTPStatus.NOT_FOUND:
                    return False
                raise
            return True

        return await self._call(self._translate_missing_kind(run))

    async def remove(self, api_version: str, kind: str, name: str, namespace: str | None,
                     current: Mapping[str, Any]) -> bool:
        """Delete a copy DRO-DS no longer wants (``current``: as the member holds it), or release it when
        it says to be preserved (`drods.model.dispatch.preserved`); False if it was not there."""
        if preserved(current):
            return await self.release(api_version, kind, name, namespace)
        return await self.delete(api_version, kind, name, namespace)

    async def delete_manifest(self, manifest: Mapping[str, Any]) -> bool:
        meta = manifest.get("metadata") or {}
        return await self.delete(manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace"))

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """The object, or None when it doesn't exist."""
        def run() -> Obj | None:
            res = self._resource(api_version, kind)
            ns = (namespace or "default") if res.namespaced else None
            return self._get_or_none(res.item(name, ns))

        return await self._call(self._translate_missing_kind(run))

    async def status(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """An object's ``status`` (``{}`` when it has none yet), or None when the object doesn't exist."""
        obj = await self.get(api_version, kind, name, namespace)
        return None if obj is None else dict(obj.get("status") or {})

    async def list_objects(self, api_version: str, kind: str, namespace: str | None = None,
                           label_selector: str | None = None) -> list[Obj]:
        def run() -> list[Obj]:
            res = self._resource(api_version, kind)
            query = [("labelSelector", label_selector)] if label_selector else []
            out = self._get_json(res.collection(namespace), query)
            return [dict(i) for i in out.get("items") or []]

        return await self._call(self._translate_missing_kind(run))

    async def resource(self, api_version: str, kind: str) -> ServedResource:
        """Where the cluster serves a kind (its discovery): `MemberError` 404 when it does not."""
        def run() -> ServedResource:
            return self._resource(api_version, kind)

        return await self._call(self._translate_missing_kind(run))

    async def list_versioned(self, res: ServedResource, label_selector: str | None = None) -> tuple[list[Obj], str]:
        """Every object of the kind in every namespace (that ``label_selector`` selects), and the
        resourceVersion to watch from."""
        return await self._call(lambda: self._list_versioned(res.path, label_selector))

    async def watch_from(self, res: ServedResource, resource_version: str, seconds: float,
                         deliver: Callable[[str, Obj], None], label_selector: str | None = None) -> str:
        """Follow the kind's changes from ``resource_version`` for up to ``seconds`` (the server ends
        the watch); ``deliver(type, object)`` runs in a worker thread for each event. Returns the last
        resourceVersion seen; raises `WatchExpired` when the cluster no longer has that history.
        Cancelled, it cuts its request: the thread does not go on reading until the server ends it."""
        held: list[Any] = []
        cancelled = threading.Event()  # set when the caller gave up while the request was on its way

        def run() -> str:
            query = [("watch", "true"), ("resourceVersion", resource_version),
                     ("timeoutSeconds", max(1, round(seconds)))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            resp = self._send("GET", res.path, query=query,
                              timeout=(self.options.connect_timeout, seconds + self.options.read_timeout))
            last = resource_version
            self._watches.add(resp)
            held.append(resp)
            if cancelled.is_set() or self._closed:  # nobody cut it: it would be read until the server ends it
                self._watches.discard(resp)
                with contextlib.suppress(Exception):
                    resp.shutdown()
                resp.release_conn()
                return last
            try:
                self._heard(stream=True)  # its headers: the stream is open
                for line in resp:
                    self._heard(stream=True)
                    if not line.strip():
                        continue
                    event = jsondoc.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise WatchExpired(self.name, str(obj.get("message") or "watch ended with an error"))
                    last = str((obj.get("metadata") or {}).get("resourceVersion") or last)
                    deliver(str(event.get("type")), obj)
                if not (self._closed or cancelled.is_set()):  # the server ended it: its end arrived now
                    self._heard(stream=True)
            except (urllib3.exceptions.HTTPError, OSError, ValueError):
                if not self._closed:  # cut by close(): the watch just ends
                    raise
            finally:
                self._watches.discard(resp)
                resp.release_conn()
            return last

        try:
            return await self._call(run, retry=False, paced=False)
        except asyncio.CancelledError:
            cancelled.set()
            for resp in held:
                with contextlib.suppress(Exception):
                    resp.shutdown()
            raise

    async def nodes(self) -> list[Obj]:
        return await self._call(lambda: self._list_all("/api/v1/nodes"))

    async def pods(self, namespace: str | None = None) -> list[Obj]:
        """The pods (of ``namespace``, or all): from `follow_pods`'s cache while it follows (pruned to
        what the summary and the usage read: `drods.members.pod_cache`), else one listing."""
        cache = self._pod_cache
        if cache is not None and cache.following:
            return cache.pods(namespace)
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return await self._call(lambda: self._list_all(path))

    def follow_pods(self) -> PodCache:
        """Keep this member's pods by list and watch from now on, on the running event loop (the
        components that summarise a member again and again: health, the pull agent); `close` stops it."""
        cache = self._pod_cache
        if cache is None:
            cache = self._pod_cache = PodCache(self, expired=history_gone)
        if not self._closed:
            cache.start()
        return cache

    def foreign_names(self) -> ForeignNames:
        """What answers, without a call, whether the member holds an object DRO-DS did not create
        (`drods.members.foreign_names`); it follows each kind asked about from then on."""
        if self._foreign is None:
            self._foreign = ForeignNames(self, expired=history_gone)
        return self._foreign

    async def list_pods_versioned(self) -> tuple[list[Obj], str]:
        return await self.list_versioned(PODS)

    async def watch_pods(self, resource_version: str, seconds: float, deliver: Callable[[str, Obj], None]) -> str:
        return await self.watch_from(PODS, resource_version, seconds, deliver)

    async def node_metrics(self) -> list[Obj] | None:
        """metrics.k8s.io NodeMetrics, or None when the cluster serves no metrics API."""
        def run() -> list[Obj] | None:
            try:
                return list(self._get_json("/apis/metrics.k8s.io/v1beta1/nodes").get("items") or [])
            except ApiException as e:
                if e.status in (404, 503):  # no metrics-server, or its APIService is unavailable
                    return None
                raise

        return await self._call(run)

    async def pod_metrics(self, namespace: str) -> list[Obj] | None:
        """metrics.k8s.io PodMetrics of one namespace (one list), or None when no metrics API is served."""
        def run() -> list[Obj] | None:
            try:
                return self._list_all(f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods")
            except ApiException as e:
                if e.status in (404, 503):
                    return None
                raise

        return await self._call(run)

    async def node_traffic(self, names: list[str]) -> dict[str, Sample]:
        """Each node's network counters from its kubelet's stats summary (through the node proxy);
        nodes whose summary cannot be read are left out."""
        async def one(name: str) -> tuple[str, Sample | None]:
            def run() -> Sample | None:
                try:
                    doc = self._get_json(f"/api/v1/nodes/{name}/proxy/stats/summary")
                except (ApiException, ValueError):  # no proxy, kubelet down, forbidden: not the member's health
                    return None
                return node_sample(doc, time.time()) if isinstance(doc, dict) else None
            try:
                return name, await self._call(run, retry=False)
            except (MemberError, MemberUnavailable):
                return name, None

        got = await asyncio.gather(*(one(n) for n in names))
        return {n: s for n, s in got if s is not None}

    async def summary(self) -> ClusterSummary:
        """Resources, largest free node, water level, network traffic, topology and version (see
        `drods.members.summary`; traffic from the kubelets' counters, `drods.members.traffic`)."""
        nodes, pods, metrics, version = await asyncio.gather(self.nodes(), self.pods(), self.node_metrics(),
                                                             self.version())
        names = [str((n.get("metadata") or {}).get("name")) for n in nodes]
        traffic = self.traffic.rates(await self.node_traffic(self.traffic.due(names)), names)
        return summarise(nodes, pods, metrics, version, network=traffic)

    def _translate_missing_kind(self, fn: Callable[[], T]) -> Callable[[], T]:
        def run() -> T:
            try:
                return fn()
            except KindNotServed as e:
                raise MemberError(self.name, 404, "NotFound", f"the cluster does not serve this kind: {e}") from e
        return run

    async def close(self) -> None:
        self._closed = True
        if self._pod_cache is not None:
            await self._pod_cache.stop()
        if self._foreign is not None:
            await self._foreign.stop()
        for resp in list(self._watches):  # a thread reading a watch stops now, not at its timeout
            with contextlib.suppress(Exception):
                resp.shutdown()
        self._pool.shutdown(wait=False, cancel_futures=True)
        api = self._api
        if api is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(api.close)
        for path in self._cleanup:
            with contextlib.suppress(OSError):
                path.unlink()


class MemberPool:
    """The member clients of a control plane, by cluster name."""

    def __init__(self) -> None:
        self._clients: dict[str, MemberClient] = {}

    def add(self, member: MemberClient) -> None:
        if member.name in self._clients:
            raise ValueError(f"member {member.name!r} is already in the pool")
        self._clients[member.name] = member

    async def remove(self, name: str) -> None:
        member = self._clients.pop(name, None)
        if member is not None:
            await member.close()

    def get(self, name: str) -> MemberClient:
        return self._clients[name]

    def __contains__(self, name: object) -> bool:
        return name in self._clients

    def names(self) -> list[str]:
        return sorted(self._clients)

    def states(self) -> dict[str, ConnectionState]:
        return {n: c.state for n, c in self._clients.items()}

    async def summaries(self) -> dict[str, ClusterSummary | BaseException]:
        """Every member's summary at once; one cluster's failure is its own entry, not everyone's."""
        names = self.names()
        results = await asyncio.gather(*(self._clients[n].summary() for n in names), return_exceptions=True)
        return dict(zip(names, results, strict=True))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._clients.values()), return_exceptions=True)
        self._clients.clear()
