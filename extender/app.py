"""The extender's HTTP layer: a thin flask app over :mod:`extender.handlers`.

Why thin, and why it never answers 500: kube-scheduler treats any non-200 answer (or a body it
cannot decode) as a failed extender call. The extender is registered ``ignorable: true``, so a
failure only costs the pod our reservations and scores, but it is still logged on every
attempt and hides the real problem. So this layer turns bytes into ExtenderArgs and back, and:

- malformed input (not JSON, missing ``Pod``, neither ``Nodes`` nor ``NodeNames``, wrong
  types) gets 400 with a one-line reason: that is the caller's bug, and it should see it;
- bodies larger than ``max_body_bytes`` (default 128 MiB: 5,000 full Node objects can pass
  50 MiB when ``nodeCacheCapable`` is false) get 413 without being read;
- an unexpected error inside a handler is logged and answered *open*: every candidate node
  passes the filter and every score is 0, exactly as if the extender knew nothing.

The state is read through a provider callable for each request (cheap: it returns the
current immutable :class:`extender.state.ExtenderState`), so one in-memory cache serves every
gunicorn thread. Paths: ``POST /filter``, ``POST /prioritize``, ``GET /healthz`` (liveness),
``GET /readyz`` (cache synced), ``GET /metrics``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from flask import Flask, Response

from extender import handlers
from extender.assumed import AssumedPods
from extender.state import ExtenderState
from provisioner import metrics
from provisioner.clock import Clock, RealClock
from provisioner.scheduling.extenderscore import MIN_PRIORITY
from provisioner.webapp import RequestBodyError, metrics_response, plain, plain_http_errors, read_body

log = logging.getLogger("groupless.extender")

#: Default cap on a request body, in bytes.
DEFAULT_MAX_BODY_BYTES = 128 * 1024 * 1024

StateProvider = Callable[[], ExtenderState]


def _read_json(max_body_bytes: int) -> tuple[Any, bytes]:
    """The decoded body and its bytes; RequestBodyError 413 when too large, 400 when empty or not JSON."""
    body = read_body(max_body_bytes, expected="ExtenderArgs JSON")
    try:
        # orjson: strict RFC 8259 (no NaN/Infinity), UTF-8 only, nesting capped at 1,024 levels
        return orjson.loads(body), body
    except ValueError as error:  # orjson.JSONDecodeError is a json.JSONDecodeError
        reason = " ".join(str(error).split())[:200]
        raise RequestBodyError(400, f"request body is not JSON: {reason}") from None


def _json(value: Any) -> Response:
    try:
        data = orjson.dumps(value)
    except TypeError:  # e.g. an integer beyond 64 bits echoed from a Node item: the slower, general encoder
        data = json.dumps(value, separators=(",", ":")).encode()
    return Response(data, status=200, content_type="application/json")


def _open_answer(verb: str, args: Any) -> Any:
    """What we answer when a handler fails unexpectedly: as if we knew nothing."""
    decoded = handlers.decode_args(args)
    if verb == "prioritize":
        return [{"Host": name, "Score": MIN_PRIORITY} for name in decoded.names]
    return {
        "Nodes": {"metadata": {}, "items": decoded.items} if decoded.items is not None else None,
        "NodeNames": decoded.names if decoded.node_names_mode else None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


class _BodyRecorder:
    """Keeps the first ``limit`` request bodies of each verb in ``directory`` as ``<verb>-<n>.json``.

    ``directory`` None keeps nothing. Safe across gunicorn threads; a body that cannot be
    written (OSError) is logged and skipped.
    """

    def __init__(self, directory: str | None, limit: int) -> None:
        self._directory = directory
        self._limit = limit
        self._recorded: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, verb: str, body: bytes) -> None:
        directory = self._directory
        if directory is None:
            return
        with self._lock:
            count = self._recorded.get(verb, 0)
            if count >= self._limit:
                return
            self._recorded[verb] = count + 1
        try:
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, f"{verb}-{count + 1}.json"), "wb") as out:
                out.write(body)
        except OSError as error:
            log.warning("Could not record a /%s request body in %s: %s", verb, directory, error)


def create_app(
    state_provider: StateProvider,
    trigger: handlers.Trigger | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    clock: Clock | None = None,
    expiry_horizon: float = handlers.DEFAULT_EXPIRY_HORIZON,
    ready: Callable[[], bool] | None = None,
    record_dir: str | None = None,
    record_limit: int = 20,
) -> Flask:
    """The extender's WSGI app; serve it with :func:`provisioner.serving.serve`.

    - ``state_provider``: returns the current :class:`ExtenderState` (called once per request).
    - ``trigger``: the provisioning controller's in-process signal (``trigger(pod_uid)``) when
      the extender runs in the controller's process; None otherwise.
    - ``max_body_bytes``: larger bodies get 413. ``clock``: time for nomination deadlines and
      expiry (default the real clock). ``ready``: ``/readyz`` answers 503 while it returns
      False (e.g. before the cache has synced); always ready when None. ``/healthz`` is
      liveness only: 200 whenever the process serves (a slow first list of a big cluster must
      not get the container restarted; until then every node passes, as if unmanaged).
    - ``record_dir``: keep the first ``record_limit`` request bodies of each verb there, as
      ``<verb>-<n>.json`` (the test suite's fixtures are recorded this way from a real
      kube-scheduler); unreadable bodies are not kept.

    The app keeps one :class:`~extender.assumed.AssumedPods` for its filter calls, so room
    beside a reservation is passed once while kube-scheduler's bindings reach the cache.
    """
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
    time_source = clock or RealClock()
    app = Flask("groupless-extender")
    record = _BodyRecorder(record_dir, record_limit)
    assumed = AssumedPods()  # pods passed beside reservations, until their bindings reach the cache

    def serve_verb(verb: str, answer: Callable[[Mapping[str, Any], ExtenderState, float], Any]) -> Response:
        with metrics.time_call(metrics.EXTENDER_DURATION, verb=verb) as labels:
            args: Any = None
            try:
                args, body = _read_json(max_body_bytes)
                result = answer(args, state_provider(), time_source.now())
                record(verb, body)
            except RequestBodyError as error:
                labels["code"] = str(error.status)
                log.info("Rejected /%s request: %s", verb, error)
                return plain(error.status, f"{'bad request' if error.status == 400 else 'too large'}: {error}")
            except handlers.BadRequest as error:
                labels["code"] = "400"
                log.info("Rejected /%s request: %s", verb, error)
                return plain(400, f"bad request: {error}")
            except RecursionError:
                labels["code"] = "400"
                return plain(400, "bad request: the request is nested too deeply")
            except Exception:  # last line of defence: answer as if we knew nothing
                log.exception("Internal error answering /%s; answering without Groupless' rules", verb)
                try:
                    result = _open_answer(verb, args)
                except Exception:
                    labels["code"] = "400"
                    return plain(400, "bad request: unreadable ExtenderArgs")
                labels["code"] = "200"
                return _json(result)
            labels["code"] = "200"
            return _json(result)

    @app.post("/filter")
    def filter_endpoint() -> Response:
        return serve_verb("filter", lambda a, s, n: handlers.filter(a, s, n, trigger, assumed))

    @app.post("/prioritize")
    def prioritize_endpoint() -> Response:
        return serve_verb("prioritize", lambda a, s, n: handlers.prioritize(a, s, n, expiry_horizon))

    @app.get("/healthz")
    def healthz() -> Response:
        # liveness: the process serves (it fails open while the cache syncs, so it is useful early)
        return plain(200, "ok")

    @app.get("/readyz")
    def readyz() -> Response:
        if ready is not None and not ready():
            return plain(503, "not ready: cluster state not synced")
        return plain(200, "ok")

    app.get("/metrics")(metrics_response)
    plain_http_errors(app)

    return app


def create_app_for_cluster(
    cluster: Any,
    trigger: handlers.Trigger | None = None,
    *,
    own_informers: bool = False,
    price_of: Any = None,
    **options: Any,
) -> Flask:
    """The extender app over a :class:`provisioner.state.ClusterState` (in-process with the controller).

    The controller passes its own cache (``own_informers=False``: it runs the informers) and
    its provisioning trigger (``ProvisioningController.trigger``). ``options`` go to
    :func:`create_app` (``max_body_bytes``, ``clock``, ``expiry_horizon``). ``/readyz``
    answers 503 until the cache has synced.
    """
    from extender.live import LiveState

    live = LiveState(cluster, price_of=price_of, own_informers=own_informers)
    app = create_app(live, trigger, ready=live.ready, **options)
    app.extensions["groupless_live_state"] = live
    return app
