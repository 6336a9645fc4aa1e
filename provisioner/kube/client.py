"""The :class:`~provisioner.kube.api.KubeAPI` protocol against a real kube-apiserver.

Built on the kubernetes client's ``ApiClient`` (authentication, TLS, proxies, token refresh
come from its configuration) with REST paths derived from :data:`~provisioner.kube.api.RESOURCES`,
so every kind, Karpenter's Provisioner included, goes through one code path over plain dicts:
no generated models, no per-kind API classes. Why not the DynamicClient: it fetches discovery
documents on first use of every kind, an extra round trip per process and kind we already know.

Wire facts followed (Kubernetes API concepts, "Efficient detection of changes" and "Patch"):

* a dict patch is sent as ``application/merge-patch+json`` (RFC 7386), a list as
  ``application/json-patch+json`` (RFC 6902); custom resources do not support strategic merge;
* list is paginated (``limit``/``continue``) and its ``metadata.resourceVersion`` starts the
  watch; a watch resumes from the last seen resourceVersion, asks for bookmarks, and an
  expired one is HTTP 410 or an ``ERROR`` event with code 410, surfaced as :class:`GoneError`;
* eviction is ``POST .../pods/{name}/eviction`` with a ``policy/v1`` Eviction body; a
  PodDisruptionBudget refusal is 429 (:class:`TooManyRequestsError`);
* errors carry a ``Status`` body whose ``reason`` tells ``AlreadyExists`` from ``Conflict``
  (both 409).

Client-side rate limiting (a token bucket, as client-go's ``QPS``/``Burst``) keeps a burst of
reconciles from flooding the API server; watches are exempt, as in client-go, and Events
have a bucket of their own so that a burst of them never delays a Node creation.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as _k8s_config
from kubernetes import watch as _k8s_watch
from kubernetes.client import rest as _k8s_rest
from kubernetes.client.exceptions import ApiException
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from provisioner.kube.api import (
    RESOURCES,
    AlreadyExistsError,
    ApiError,
    ConflictError,
    GoneError,
    NotFoundError,
    Object,
    ObjectList,
    TooManyRequestsError,
    WatchEvent,
    resource_for,
)

log = logging.getLogger(__name__)

# The kubernetes client is only partly annotated; its untyped entry points are used through Any.
k8s_config: Any = _k8s_config
k8s_watch: Any = _k8s_watch
k8s_rest: Any = _k8s_rest

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
LIST_PAGE_SIZE = 500
#: Kept-alive connections to the API server. The kubernetes client's own default is
#: ``cpu_count * 5`` (10 on 2 cores), fewer than the provisioning controller's 16 launch threads
#: plus the reconcilers and informers need at once: urllib3 then logs "Connection pool is full,
#: discarding connection" and opens a new TCP/TLS connection per request under a pod burst.
DEFAULT_POOL_SIZE = 32

#: Statuses worth retrying for idempotent reads: the server is briefly unavailable.
_TRANSIENT = frozenset({500, 502, 503, 504})


def resource_path(
    kind: str, name: str | None = None, namespace: str | None = None, subresource: str | None = None
) -> str:
    """The REST path of a kind, an object or one of its subresources.

    ``resource_path("Pod", "web-1", "default", "eviction")`` is
    ``/api/v1/namespaces/default/pods/web-1/eviction``; a namespaced kind without a namespace
    is the all-namespaces collection. KeyError-free: an unknown kind is an :class:`ApiError` 404.
    """
    res = resource_for(kind)
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    if res.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    path = f"{base}/{res.plural}"
    if name is not None:
        path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
    return path


def error_from_response(status: int, body: str | bytes | None, http_reason: str = "") -> ApiError:
    """The typed :class:`ApiError` for an HTTP error status and its ``Status`` body."""
    reason, message = http_reason or "", ""
    if body:
        try:
            doc = json.loads(body)
            if isinstance(doc, Mapping):
                reason = str(doc.get("reason") or reason)
                message = str(doc.get("message") or "")
        except (ValueError, TypeError):
            message = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    if status == 404:
        return NotFoundError(message)
    if status == 409:
        return AlreadyExistsError(message) if reason == "AlreadyExists" else ConflictError(message)
    if status == 410:
        return GoneError(message)
    if status == 429:
        return TooManyRequestsError(message)
    return ApiError(status, reason, message)


def error_from_exception(exc: ApiException) -> ApiError:
    """The typed :class:`ApiError` for the kubernetes client's ``ApiException``."""
    status = int(exc.status or 0)
    if status == 410 and not exc.body:
        return GoneError(str(exc.reason or ""))
    return error_from_response(status, exc.body, str(exc.reason or ""))


def watch_event_from_raw(raw: Mapping[str, Any], kind: str) -> WatchEvent | None:
    """A :class:`WatchEvent` from one decoded watch line; GoneError for an ``ERROR`` 410; None to skip."""
    type_ = raw.get("type")
    obj = raw.get("raw_object", raw.get("object"))
    if type_ == "ERROR":
        status = obj if isinstance(obj, Mapping) else {}
        raise error_from_response(int(status.get("code") or 500), json.dumps(status))
    if type_ not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") or not isinstance(obj, dict):
        return None
    res = RESOURCES[kind]
    obj.setdefault("apiVersion", res.api_version)
    obj.setdefault("kind", kind)
    return WatchEvent(str(type_), obj)


class TokenBucket:
    """client-go's token-bucket rate limiter: ``qps`` tokens a second, at most ``burst`` saved."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Wait until a token is available (never when ``qps`` <= 0: unlimited)."""
        if self.qps <= 0:
            return
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.qps
            time.sleep(wait)


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, ApiError) and exc.status in _TRANSIENT


class KubeClient:
    """:class:`~provisioner.kube.api.KubeAPI` over HTTP(S) with the kubernetes client's ``ApiClient``.

    ``qps``/``burst`` rate-limit requests (watches excepted); ``pool_size`` is the number of
    kept-alive connections (urllib3's ``maxsize``), enough for the controllers' threads and
    the informers' watches. Reads are retried (3 attempts, exponential backoff) on 5xx.
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        qps: float = 50.0,
        burst: int = 100,
        request_timeout: float = 30.0,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        """Wrap ``api_client``, whose connection pool is resized to ``pool_size`` connections.

        The pool is urllib3's, built when the ``ApiClient`` was constructed from its
        configuration's ``connection_pool_maxsize``; when that differs from ``pool_size``, the
        configuration is updated and the pool rebuilt (the old one closed), so every construction
        path (kubeconfig, in-cluster, a caller's ``ApiClient``) ends with the same pool size.
        Raises ValueError when ``pool_size`` < 1.
        """
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.api_client = api_client
        self.pool_size = pool_size
        client: Any = api_client
        if client.configuration.connection_pool_maxsize != pool_size:
            client.configuration.connection_pool_maxsize = pool_size
            previous = client.rest_client
            client.rest_client = k8s_rest.RESTClientObject(client.configuration)
            previous.close()
        self.limiter = TokenBucket(qps, burst)
        # Events get their own bucket: a burst of Nominated events must not delay Node creation
        self.event_limiter = TokenBucket(qps, burst)
        self.request_timeout = request_timeout

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | None = None,
        *,
        context: str | None = None,
        qps: float = 50.0,
        burst: int = 100,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> KubeClient:
        """A client from a kubeconfig file, or in-cluster config when ``path`` is None.

        With ``path`` None and no in-cluster service account, ``$KUBECONFIG`` (or
        ``~/.kube/config``) is tried before giving up with the kubernetes client's
        ``ConfigException``. ``pool_size``: kept-alive connections (see :meth:`__init__`).
        """
        configuration = k8s_client.Configuration()
        if path:
            k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)
            except k8s_config.ConfigException:
                fallback = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
                if not os.path.exists(fallback.split(os.pathsep)[0]):
                    raise
                k8s_config.load_kube_config(
                    config_file=fallback, context=context, client_configuration=configuration
                )
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s_client.ApiClient(configuration), qps=qps, burst=burst, pool_size=pool_size)

    def close(self) -> None:
        """Release the connection pool."""
        api_client: Any = self.api_client
        api_client.close()

    # ------------------------------------------------------------------ transport
    def _request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        limiter: TokenBucket | None = None,
    ) -> Any:
        """One request; the decoded JSON body, or a typed ApiError."""
        (limiter or self.limiter).acquire()
        headers = {"Accept": "application/json", "Content-Type": content_type}
        request = self.api_client.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response: Any = self.api_client.call_api(*request, _request_timeout=self.request_timeout)
            data = response.read()
        except ApiException as exc:
            raise error_from_exception(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # connection refused/reset, TLS failure, timeout: the server is unavailable (retryable)
            raise ApiError(503, "ServiceUnavailable", f"{method} {path}: {exc}") from exc
        if not 200 <= response.status <= 299:
            raise error_from_response(response.status, data, str(response.reason or ""))
        return json.loads(data) if data else None

    def _read(self, path: str, query: list[tuple[str, Any]] | None = None) -> Any:
        for attempt in Retrying(
            retry=retry_if_exception(_is_transient),
            stop=stop_after_attempt(3),
            wait=wait_exponential(multiplier=0.2, max=2),
            reraise=True,
        ):
            with attempt:
                return self._request("GET", path, query=query)
        raise AssertionError("unreachable")  # pragma: no cover

    def _limiter_for(self, kind: str) -> TokenBucket:
        return self.event_limiter if kind == "Event" else self.limiter

    # ------------------------------------------------------------------ KubeAPI
    def get(self, kind: str, name: str, namespace: str | None = None) -> Object:
        obj: Object = self._read(resource_path(kind, name, namespace))
        return _with_kind(obj, kind)

    def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[ObjectList, str]:
        """All pages of the list; the last page's resourceVersion (all pages share one snapshot)."""
        path = resource_path(kind, None, namespace)
        items: ObjectList = []
        cont = ""
        while True:
            query: list[tuple[str, Any]] = [("limit", LIST_PAGE_SIZE)]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if cont:
                query.append(("continue", cont))
            try:
                page = self._read(path, query)
            except GoneError:
                if not cont:
                    raise
                # the continue token expired mid-list: start over for a fresh snapshot
                items, cont = [], ""
                continue
            items.extend(_with_kind(o, kind) for o in page.get("items") or [])
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                return items, str(meta.get("resourceVersion") or "")

    def watch(self, kind: str, resource_version: str, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        """Watch events after ``resource_version`` with the kubernetes client's ``Watch``; GoneError on 410."""
        path = resource_path(kind)
        watcher = k8s_watch.Watch()

        def open_stream(**kwargs: Any) -> object:  # `object`: Watch must not look up a model
            query: list[tuple[str, Any]] = [
                ("watch", "true"),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", int(kwargs.get("timeout_seconds", timeout_seconds))),
            ]
            rv = kwargs.get("resource_version")
            if rv:
                query.append(("resourceVersion", rv))
            request = self.api_client.param_serialize(
                "GET",
                path,
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            try:
                response: Any = self.api_client.call_api(
                    *request, _request_timeout=(10, timeout_seconds + 15)
                )
            except ApiException as exc:
                raise error_from_exception(exc) from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise ApiError(503, "ServiceUnavailable", f"watch {path}: {exc}") from exc
            if not 200 <= response.status <= 299:
                raise error_from_response(response.status, response.read(), str(response.reason or ""))
            return response.response

        try:
            for raw in watcher.stream(
                open_stream, resource_version=resource_version, timeout_seconds=timeout_seconds
            ):
                event = watch_event_from_raw(raw, kind)
                if event is not None:
                    yield event
        except ApiException as exc:
            raise error_from_exception(exc) from exc
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError) as exc:
            # the server closed the stream mid-way: the watch simply ends, the caller resumes
            log.debug("Watch of %s ended early: %s", kind, exc)
            return
        finally:
            watcher.stop()

    def create(self, kind: str, obj: Object) -> Object:
        res = resource_for(kind)
        namespace = (obj.get("metadata") or {}).get("namespace") or ("default" if res.namespaced else None)
        body = {**obj, "apiVersion": res.api_version, "kind": kind}
        created: Object = self._request(
            "POST", resource_path(kind, None, namespace), body=body, limiter=self._limiter_for(kind)
        )
        return _with_kind(created, kind)

    def patch(
        self,
        kind: str,
        name: str,
        patch: Object | ObjectList,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        content_type = JSON_PATCH if isinstance(patch, list) else MERGE_PATCH
        patched: Object = self._request(
            "PATCH",
            resource_path(kind, name, namespace, subresource),
            body=patch,
            content_type=content_type,
            limiter=self._limiter_for(kind),
        )
        return _with_kind(patched, kind)

    def replace(self, kind: str, obj: Object, subresource: str | None = None) -> Object:
        meta = obj.get("metadata") or {}
        res = resource_for(kind)
        body = {**obj, "apiVersion": res.api_version, "kind": kind}
        replaced: Object = self._request(
            "PUT", resource_path(kind, meta.get("name", ""), meta.get("namespace"), subresource), body=body
        )
        return _with_kind(replaced, kind)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        # DeleteOptions as query parameters: valid for every group, no body version to get wrong
        self._request(
            "DELETE", resource_path(kind, name, namespace), query=[("propagationPolicy", "Background")]
        )

    def evict(self, name: str, namespace: str) -> None:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        self._request("POST", resource_path("Pod", name, namespace, "eviction"), body=body)


def _with_kind(obj: Object, kind: str) -> Object:
    """List items and some answers lack apiVersion/kind; callers rely on them."""
    res = RESOURCES[kind]
    obj.setdefault("apiVersion", res.api_version)
    obj.setdefault("kind", kind)
    return obj
