"""Structured logging for every Groupless process: text by default, JSON with a flag.

Why: operators grep the controller log for the walkthrough's lines ("Batched 3 pods in
1.05s", "Computed packing of 1 node(s) for 3 pod(s) ...", "Launched instance: i-..., ..."),
and log pipelines (Fluent Bit, Loki, CloudWatch) want one JSON object per line. Both views
come from the same stdlib ``logging`` records: one logger per module
(``logging.getLogger(__name__)``), the object a line is about attached as fields
(kind/namespace/name, like controller-runtime's ``"Provisioner": {"name": "default"}``), and
the level from ``--log-level`` or ``GROUPLESS_LOG_LEVEL``.

Text line::

    2026-11-30T10:04:03.123Z INFO  provisioner.controllers.provisioning Batched 3 pods in 1.05s {provisioner=default}

JSON line::

    {"time": "2026-11-30T10:04:03.123Z", "level": "info", "logger": "provisioner.controllers.provisioning",
     "message": "Batched 3 pods in 1.05s", "provisioner": "default"}

Usage::

    log = logging.getLogger(__name__)
    object_logger(log, provisioner_obj).info("Created node with %d pods requesting %s", n, reqs)
    log.info("Batched %d pods in %.2fs", n, seconds, extra={"provisioner": name})
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime
from typing import IO, Any

#: Environment variables read when the flags are not given.
LEVEL_ENV = "GROUPLESS_LOG_LEVEL"
FORMAT_ENV = "GROUPLESS_LOG_FORMAT"

#: The values ``--log-level``/``GROUPLESS_LOG_LEVEL`` take, in every process (controller, webhook,
#: extender), any case. One definition, so a Deployment's environment works for all three.
LEVEL_NAMES = ("debug", "info", "warning", "error")
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
#: The values ``--log-format``/``GROUPLESS_LOG_FORMAT`` take.
FORMATS = ("text", "json")
LEVEL_FLAG = "--log-level"
FORMAT_FLAG = "--log-format"


class LoggingConfigError(ValueError):
    """A bad log level or format; the message names the flag, the variable and the value, on one line."""


def level_name(text: str) -> str:
    """``text`` as one of :data:`LEVEL_NAMES` (surrounding space and case ignored).

    Raises ValueError ``expected one of debug, info, warning, error, got 'loud'``. The
    controller's settings parse ``--log-level`` with it too.
    """
    value = text.strip().lower()
    if value not in LEVELS:
        raise ValueError(f"expected one of {', '.join(LEVEL_NAMES)}, got {text!r}")
    return value


def format_name(text: str) -> str:
    """``text`` as one of :data:`FORMATS` (space and case ignored); ValueError naming the value otherwise."""
    value = text.strip().lower()
    if value not in FORMATS:
        raise ValueError(f"expected one of {', '.join(FORMATS)}, got {text!r}")
    return value


def _resolve(value: str | None, flag: str, env: str, default: str, parse: Any) -> str:
    """The flag's value, else the variable's, else ``default``, parsed; LoggingConfigError naming the source."""
    source = flag
    if not value:
        value, source = os.environ.get(env), env
    if not value:
        return str(default)
    try:
        return str(parse(value))
    except ValueError as error:
        # the same shape as every other setting of the controller (provisioner.settings)
        raise LoggingConfigError(f"{source} ({flag} / {env}): {error}") from None

#: Attributes every LogRecord has; anything else on a record came from ``extra=`` and is a field.
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(record.msecs):03d}Z"


#: Record attribute holding the object fields; ``name`` itself is reserved by LogRecord.
_OBJECT_ATTR = "groupless_object"


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of ``record``: the object's kind/namespace/name first, then ``extra=``."""
    fields: dict[str, Any] = dict(getattr(record, _OBJECT_ATTR, None) or {})
    for key, value in vars(record).items():
        if key not in _RESERVED and key != _OBJECT_ATTR and not key.startswith("_"):
            fields[key] = value
    return fields


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger> <message> {k=v, ...}``: readable in ``kubectl logs``."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        fields = record_fields(record)
        line = f"{_timestamp(record)} {record.levelname:<5} {record.name} {message}"
        if fields:
            line += " {" + ", ".join(f"{k}={v}" for k, v in fields.items()) + "}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record_fields(record).items():
            payload.setdefault(key, value)
        if record.exc_info:
            payload["error"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, separators=(", ", ": "))


def parse_level(level: str | None) -> int:
    """Map ``debug|info|warning|error`` (any case) to a logging level.

    ``None`` or empty reads ``GROUPLESS_LOG_LEVEL``, then defaults to ``info``.
    Raises LoggingConfigError (a ValueError) naming the flag or variable, the value and the
    accepted ones.
    """
    return LEVELS[_resolve(level, LEVEL_FLAG, LEVEL_ENV, "info", level_name)]


def parse_format(fmt: str | None) -> str:
    """``text`` or ``json`` from ``fmt``, else ``GROUPLESS_LOG_FORMAT``, else ``text``.

    Raises LoggingConfigError (a ValueError) naming the flag or variable and the value.
    """
    return _resolve(fmt, FORMAT_FLAG, FORMAT_ENV, "text", format_name)


def configure_logging(level: str | None = None, fmt: str | None = None, stream: IO[str] | None = None) -> None:
    """Configure the root logger once per process: one handler on ``stream`` (stderr by default).

    ``level``: ``debug|info|warning|error`` or None for ``$GROUPLESS_LOG_LEVEL`` (default info).
    ``fmt``: ``text`` (default) or ``json``, None for ``$GROUPLESS_LOG_FORMAT``.
    Calling it again replaces the previous handler (tests, or re-configuration after flag parsing).
    Noisy libraries (urllib3, botocore, kubernetes' REST client) are held at WARNING unless
    the level is debug. Raises LoggingConfigError (a ValueError) for an unknown level or
    format, before changing anything; servers print it and exit 2.
    """
    numeric = parse_level(level)
    kind = parse_format(fmt)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JSONFormatter() if kind == "json" else TextFormatter())
    handler._groupless = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_groupless", False):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    library_level = logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING
    for name in ("urllib3", "botocore", "boto3", "kubernetes", "werkzeug", "gunicorn.access"):
        logging.getLogger(name).setLevel(library_level)


def add_logging_flags(parser: Any) -> None:
    """Add ``--log-level`` and ``--log-format`` to an argparse parser (defaults from the environment).

    The values are checked by :func:`configure_logging`, not argparse, so a bad flag and a bad
    environment variable give the same one-line error (the controller's settings do the same).
    """
    parser.add_argument(LEVEL_FLAG, default=None, metavar="{" + ",".join(LEVEL_NAMES) + "}",
                        help=f"log level (default ${LEVEL_ENV} or info)")
    parser.add_argument(FORMAT_FLAG, default=None, metavar="{" + ",".join(FORMATS) + "}",
                        help=f"log format (default ${FORMAT_ENV} or text)")


def object_fields(obj: Mapping[str, Any] | tuple[str, str | None, str]) -> dict[str, str]:
    """The ``kind``/``namespace``/``name`` fields of a Kubernetes object dict or a ``(kind, namespace, name)`` tuple.

    Cluster-scoped objects (Node, Provisioner) have no namespace field. Odd objects (missing
    metadata) yield what is there rather than raising: logging must never crash a controller.
    """
    if isinstance(obj, tuple):
        kind, namespace, name = obj
    else:
        metadata = obj.get("metadata") or {}
        kind = obj.get("kind") or ""
        namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
        name = metadata.get("name", "") if isinstance(metadata, Mapping) else ""
    fields = {"kind": str(kind)}
    if namespace:
        fields["namespace"] = str(namespace)
    fields["name"] = str(name)
    return fields


class ObjectLoggerAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A LoggerAdapter that merges its object fields into every record's ``extra``."""

    def __init__(self, logger: logging.Logger, obj: Mapping[str, str], fields: Mapping[str, Any]) -> None:
        super().__init__(logger, dict(fields))
        self.object = dict(obj)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {}), _OBJECT_ATTR: self.object}
        return msg, kwargs


def object_logger(
    logger: logging.Logger | logging.LoggerAdapter,  # type: ignore[type-arg]
    obj: Mapping[str, Any] | tuple[str, str | None, str],
    **fields: Any,
) -> ObjectLoggerAdapter:
    """A logger whose lines carry the object's kind/namespace/name (plus ``fields``).

    ``obj``: a Kubernetes object dict (``kind``, ``metadata.namespace``, ``metadata.name``)
    or a ``(kind, namespace, name)`` tuple, namespace None for cluster-scoped objects.
    """
    base = logger.logger if isinstance(logger, logging.LoggerAdapter) else logger
    inherited = dict(logger.extra or {}) if isinstance(logger, logging.LoggerAdapter) else {}
    return ObjectLoggerAdapter(base, object_fields(obj), {**inherited, **fields})


def gunicorn_logger_class() -> type:
    """A ``gunicorn`` ``logger_class`` whose error and access logs go through our handler and format.

    gunicorn installs its own stderr handlers and format on ``gunicorn.error`` and
    ``gunicorn.access`` (with ``propagate = False``), so its lines ("Starting gunicorn",
    "Booting worker", worker timeouts) would stay plain text under ``--log-format json``. This
    class keeps gunicorn's levels but lets its records propagate to the root logger that
    :func:`configure_logging` set up. Use it as ``{"logger_class": gunicorn_logger_class()}``
    in the gunicorn options. Imported lazily: only the servers depend on gunicorn.
    """
    from gunicorn import glogging

    class GrouplessGunicornLogger(glogging.Logger):  # type: ignore[misc]
        def setup(self, cfg: Any) -> None:
            super().setup(cfg)
            for log in (self.error_log, self.access_log):
                for handler in list(log.handlers):
                    if getattr(handler, "_gunicorn", False):
                        log.removeHandler(handler)
                log.propagate = True

    return GrouplessGunicornLogger
