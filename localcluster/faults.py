"""An HTTP proxy in front of the local moto server that makes AWS calls fail the ways EC2 does.

Why: the controller's promises (nothing launched twice, no instance left without a Node, no
pod lost) must hold when EC2 throttles, answers 503, or launches an instance and loses the
answer; moto never does any of these. The controller is pointed at this proxy through its
EC2 endpoint setting (``GROUPLESS_AWS_ENDPOINT_URL``); every call is forwarded to moto unless
the :class:`FaultPlan` picks it for a fault:

* ``throttle``: answered at once with EC2's ``RequestLimitExceeded`` (HTTP 503), not forwarded;
* ``unavailable``: answered at once with ``Unavailable`` (HTTP 503), not forwarded;
* ``lost``: forwarded (the call takes effect: an instance is launched, terminated), then the
  connection is closed without an answer, as when a response is lost on the way back.

Which calls: the plan's ``actions`` (the Query API's ``Action``, or the operation of a JSON
protocol's ``X-Amz-Target``: ``CreateFleet``, ``TerminateInstances``, ``GetParameter``...),
every one when empty; each is picked with probability ``rate``, its fault drawn evenly from
``kinds``. The proxy also does what EC2 does and moto does not for a call carrying a
``ClientToken`` (CreateFleet, RunInstances): a repeat of a token that succeeded gets the first
answer again instead of a second launch (EC2's idempotency, "Ensuring idempotency" in the EC2
API reference), so a client retrying a lost answer behaves here as against EC2.

A test can also hold the answers to an action (:meth:`FaultProxy.hold_answers`): the calls take
effect at once and their answers wait until released, so that a process can be killed while
its call has launched an instance it has not heard of yet.

In a test, :class:`FaultProxy` runs in the test's process and its plan can be changed at any
time; ``python -m localcluster.faults --target URL`` runs one on its own (prints one JSON line
with its URL, then serves until SIGINT/SIGTERM). :meth:`FaultProxy.counts` says what was
injected, per (action, fault), and what was forwarded or replayed.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import random
import signal
import sys
import threading
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

THROTTLE = "throttle"
UNAVAILABLE = "unavailable"
LOST = "lost"
#: Every fault a plan may inject.
KINDS = (THROTTLE, UNAVAILABLE, LOST)
#: The counts of calls that got no fault: forwarded to moto, or answered from the ClientToken memory.
FORWARDED = "forwarded"
REPLAYED = "replayed"

#: Longest a held answer waits for its release, in seconds (a test that forgets one does not hang).
HOLD_LIMIT_SECONDS = 120.0
#: Headers not passed through (hop-by-hop, or recomputed).
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
                         "proxy-connection", "content-length", "host"})


@dataclass(frozen=True)
class FaultPlan:
    """Which calls fail and how: ``rate`` (0 to 1) of the calls to ``actions`` (empty: every action).

    Each call picked gets a fault drawn evenly from ``kinds``. ValueError for a rate outside 0..1
    or an unknown kind.
    """

    rate: float = 0.0
    kinds: tuple[str, ...] = KINDS
    actions: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate must be between 0 and 1, got {self.rate}")
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be some of {', '.join(KINDS)}, got {', '.join(self.kinds) or 'none'}")

    def applies_to(self, action: str) -> bool:
        return not self.actions or action in self.actions


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, headers, body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def action_of(headers: Mapping[str, str], body: bytes) -> tuple[str, dict[str, str]]:
    """The AWS operation of a request and its form parameters (empty for a JSON protocol).

    ``X-Amz-Target: AmazonSSM.GetParameter`` -> ``GetParameter``; a Query API body
    ``Action=CreateFleet&...`` -> ``CreateFleet`` with its parameters; ``""`` when neither.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    target = lowered.get("x-amz-target")
    if target:
        return target.rsplit(".", 1)[-1], {}
    try:
        params = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True).items()}
    except UnicodeDecodeError:
        return "", {}
    return params.get("Action", ""), params


def error_answer(kind: str, json_protocol: bool) -> Answer:
    """What EC2 (Query API, XML) or a JSON-protocol service answers for ``throttle`` or ``unavailable``."""
    code, message = (
        ("RequestLimitExceeded", "Request limit exceeded.") if kind == THROTTLE
        else ("Unavailable", "The service is unavailable. Please try again shortly.")
    )
    if json_protocol:
        code = "ThrottlingException" if kind == THROTTLE else "ServiceUnavailableException"
        body = json.dumps({"__type": code, "message": message}).encode()
        return Answer(400 if kind == THROTTLE else 503, (("Content-Type", "application/x-amz-json-1.1"),), body)
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>").encode()
    return Answer(503, (("Content-Type", "text/xml;charset=UTF-8"),), body)


class Injector:
    """The proxy's decisions, apart from its sockets: which fault a call gets, the ClientToken memory, the counts.

    Thread-safe. ``seed`` makes the draws repeatable.
    """

    def __init__(self, plan: FaultPlan | None = None, seed: int | None = None) -> None:
        self._plan = plan or FaultPlan()
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._answers: dict[tuple[str, str], Answer] = {}
        self._counts: Counter[tuple[str, str]] = Counter()
        self._next: dict[str, list[str]] = {}
        self._holds: dict[str, threading.Event] = {}
        self._holding: Counter[str] = Counter()

    @property
    def plan(self) -> FaultPlan:
        with self._lock:
            return self._plan

    @plan.setter
    def plan(self, plan: FaultPlan) -> None:
        with self._lock:
            self._plan = plan

    def inject_next(self, action: str, *kinds: str) -> None:
        """The next calls to ``action`` get ``kinds``, in order, whatever the plan says (then the plan again)."""
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown faults {', '.join(unknown)}: expected some of {', '.join(KINDS)}")
        with self._lock:
            self._next.setdefault(action, []).extend(kinds)

    def decide(self, action: str) -> str | None:
        """The fault for one call to ``action`` (counted), or None: forward it."""
        with self._lock:
            queued = self._next.get(action)
            if queued:
                kind = queued.pop(0)
            else:
                plan = self._plan
                if not plan.applies_to(action) or plan.rate <= 0 or self._random.random() >= plan.rate:
                    return None
                kind = plan.kinds[self._random.randrange(len(plan.kinds))]
            self._counts[(action, kind)] += 1
            return kind

    def replay(self, action: str, token: str) -> Answer | None:
        """The answer a ClientToken already got (counted as replayed), or None."""
        if not token:
            return None
        with self._lock:
            answer = self._answers.get((action, token))
            if answer is not None:
                self._counts[(action, REPLAYED)] += 1
            return answer

    def forwarded(self, action: str, token: str, answer: Answer) -> None:
        """Count a call moto answered; remember a successful answer to a ClientToken."""
        with self._lock:
            self._counts[(action, FORWARDED)] += 1
            if token and 200 <= answer.status < 300:
                self._answers.setdefault((action, token), answer)

    def counts(self) -> dict[tuple[str, str], int]:
        """(action, fault or ``forwarded`` / ``replayed``) -> calls, so far."""
        with self._lock:
            return dict(self._counts)

    def hold_answers(self, action: str) -> None:
        """From now on, answers to ``action`` wait (the calls took effect) until :meth:`release_answers`."""
        with self._lock:
            self._holds.setdefault(action, threading.Event())

    def release_answers(self, action: str) -> None:
        """Send the answers held for ``action`` (to whoever still listens) and stop holding them."""
        with self._lock:
            event = self._holds.pop(action, None)
        if event is not None:
            event.set()

    def holding(self, action: str) -> int:
        """How many answers to ``action`` are held now."""
        with self._lock:
            return self._holding[action]

    def wait_release(self, action: str, timeout: float) -> None:
        """Block while answers to ``action`` are held (at most ``timeout`` seconds)."""
        with self._lock:
            event = self._holds.get(action)
            if event is None:
                return
            self._holding[action] += 1
        try:
            event.wait(timeout)
        finally:
            with self._lock:
                self._holding[action] -= 1


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # one line per AWS call would drown a test's output

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items()}
        action, params = action_of(headers, body)
        injector = self.server.injector
        fault = injector.decide(action)
        if fault in (THROTTLE, UNAVAILABLE):
            self._send(error_answer(fault, "x-amz-target" in {k.lower() for k in headers}))
            return
        token = params.get("ClientToken", "")
        answer = injector.replay(action, token)
        if answer is None:
            answer = self._forward(body, headers)
            injector.forwarded(action, token, answer)
        injector.wait_release(action, HOLD_LIMIT_SECONDS)
        if fault == LOST:
            self.close_connection = True  # the call took effect; its answer never arrives
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
            return
        self._send(answer)

    def _forward(self, body: bytes, headers: Mapping[str, str]) -> Answer:
        target = self.server.target
        connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port or 80, timeout=60)
        try:
            forwarded = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
            forwarded["Host"] = target.netloc
            forwarded["Content-Length"] = str(len(body))
            connection.request(self.command, self.path, body=body, headers=forwarded)
            response = connection.getresponse()
            data = response.read()
            kept = tuple((k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP)
            return Answer(response.status, kept, data)
        except OSError as error:
            message = f"fault proxy: moto at {target.netloc} did not answer: {error}".encode()
            return Answer(502, (("Content-Type", "text/plain"),), message)
        finally:
            connection.close()

    def _send(self, answer: Answer) -> None:
        try:
            self.send_response(answer.status)
            for key, value in answer.headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
        except OSError:  # the client went away (a killed controller whose answer was held)
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a killed controller's kept-alive connection) is no error; others are printed."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def __init__(self, address: tuple[str, int], target: str, injector: Injector) -> None:
        super().__init__(address, _Handler)
        self.target = urllib.parse.urlsplit(target)
        self.injector = injector


class FaultProxy:
    """The proxy on ``host:port`` (0: a free port) forwarding to ``target`` (moto's URL); see the module docstring.

    ``start()`` serves on a daemon thread, ``stop()`` ends it; ``url`` is where to point the
    controller. ``plan`` may be replaced at any time.
    """

    def __init__(self, target: str, *, host: str = "127.0.0.1", port: int = 0,
                 plan: FaultPlan | None = None, seed: int | None = None) -> None:
        self.injector = Injector(plan, seed)
        self._server = _Server((host, port), target, self.injector)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def plan(self) -> FaultPlan:
        return self.injector.plan

    @plan.setter
    def plan(self, plan: FaultPlan) -> None:
        self.injector.plan = plan

    def counts(self) -> dict[tuple[str, str], int]:
        """See :meth:`Injector.counts`."""
        return self.injector.counts()

    def inject_next(self, action: str, *kinds: str) -> None:
        """See :meth:`Injector.inject_next`."""
        self.injector.inject_next(action, *kinds)

    def hold_answers(self, action: str) -> None:
        """See :meth:`Injector.hold_answers`."""
        self.injector.hold_answers(action)

    def release_answers(self, action: str) -> None:
        """See :meth:`Injector.release_answers`."""
        self.injector.release_answers(action)

    def holding(self, action: str) -> int:
        """See :meth:`Injector.holding`."""
        return self.injector.holding(action)

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m localcluster.faults --target URL [--port P] [--rate R] [--kinds ...] [--actions ...]``."""
    parser = argparse.ArgumentParser(prog="python -m localcluster.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="the moto server's URL, e.g. http://127.0.0.1:5000")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--rate", type=float, default=0.0, help="share of the selected calls that fail (0 to 1)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"faults to draw from (default {','.join(KINDS)})")
    parser.add_argument("--actions", default="", help="comma-separated operations (default: every one)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the draws (repeatable runs)")
    args = parser.parse_args(argv)
    try:
        plan = FaultPlan(args.rate, tuple(k for k in args.kinds.split(",") if k),
                         frozenset(a for a in args.actions.split(",") if a))
    except ValueError as error:
        parser.error(str(error))
    proxy = FaultProxy(args.target, port=args.port, plan=plan, seed=args.seed)
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    with proxy:
        print(json.dumps({"url": proxy.url, "target": args.target, "rate": plan.rate, "kinds": list(plan.kinds),
                          "actions": sorted(plan.actions)}), flush=True)
        stopped.wait()
    print(json.dumps({"counts": {f"{a}/{k}": n for (a, k), n in sorted(proxy.counts().items())}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
