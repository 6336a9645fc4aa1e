from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from provisioner.logging import configure_logging, object_fields, object_logger, parse_level


@pytest.fixture(autouse=True)
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_time_level_logger_message_and_object() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    log = logging.getLogger("provisioner.controllers.provisioning")
    provisioner = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "default"}}
    object_logger(log, provisioner).info("Batched %d pods in %.2fs", 3, 1.0512)
    log.debug("not shown at info")
    (line,) = stream.getvalue().splitlines()
    record = json.loads(line)
    assert record["message"] == "Batched 3 pods in 1.05s"
    assert record["level"] == "info"
    assert record["logger"] == "provisioner.controllers.provisioning"
    assert record["kind"] == "Provisioner" and record["name"] == "default" and "namespace" not in record
    assert record["time"].endswith("Z") and record["time"][10] == "T"


def test_text_lines_are_greppable_with_fields_after_the_message() -> None:
    stream = io.StringIO()
    configure_logging("debug", "text", stream=stream)
    log = logging.getLogger("provisioner.controllers.termination")
    pod_log = object_logger(log, ("Pod", "default", "inflate-6b88c9fb68-4l2sh"), node="ip-10-0-1-5")
    pod_log.info("Did not evict pod %s due to PDB violation", "default/inflate-6b88c9fb68-4l2sh")
    line = stream.getvalue().strip()
    assert (" INFO  provisioner.controllers.termination "
            "Did not evict pod default/inflate-6b88c9fb68-4l2sh due to PDB violation ") in line
    assert line.endswith("{kind=Pod, namespace=default, name=inflate-6b88c9fb68-4l2sh, node=ip-10-0-1-5}")


def test_exceptions_are_kept_in_both_formats() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    try:
        raise RuntimeError("CreateFleet failed")
    except RuntimeError:
        logging.getLogger("x").exception("Provisioning failed")
    record = json.loads(stream.getvalue())
    assert record["level"] == "error" and "RuntimeError: CreateFleet failed" in record["error"]


def test_level_from_environment_and_errors_name_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUPLESS_LOG_LEVEL", "WARNING")
    assert parse_level(None) == logging.WARNING
    assert parse_level("debug") == logging.DEBUG
    monkeypatch.delenv("GROUPLESS_LOG_LEVEL")
    assert parse_level(None) == logging.INFO
    with pytest.raises(ValueError, match=r"^--log-level \(--log-level / GROUPLESS_LOG_LEVEL\): "
                       r"expected one of debug, info, warning, error, got 'verbose'$"):
        parse_level("verbose")
    with pytest.raises(ValueError, match=r"^--log-format .*: expected one of text, json, got 'xml'$"):
        configure_logging("info", "xml")
    monkeypatch.setenv("GROUPLESS_LOG_FORMAT", "json")
    stream = io.StringIO()
    configure_logging(None, None, stream=stream)
    logging.getLogger("y").warning("hello")
    assert json.loads(stream.getvalue())["message"] == "hello"


def test_reconfiguring_replaces_the_handler_instead_of_duplicating_lines() -> None:
    stream = io.StringIO()
    configure_logging("info", "text", stream=io.StringIO())
    configure_logging("info", "text", stream=stream)
    logging.getLogger("z").info("once")
    assert stream.getvalue().count("once") == 1


def test_object_fields_tolerate_odd_objects_and_adapters_stack() -> None:
    assert object_fields({}) == {"kind": "", "name": ""}
    assert object_fields({"kind": "Node", "metadata": None}) == {"kind": "Node", "name": ""}
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    base = object_logger(logging.getLogger("a"), ("Node", None, "n1"), provisioner="default")
    object_logger(base, ("Pod", "ns", "p")).info("m", extra={"zone": "ap-south-1a"})
    record = json.loads(stream.getvalue())
    assert (record["kind"], record["namespace"], record["name"]) == ("Pod", "ns", "p")
    assert record["provisioner"] == "default" and record["zone"] == "ap-south-1a"


def test_gunicorn_lines_use_our_format() -> None:
    from gunicorn.config import Config

    from provisioner.logging import gunicorn_logger_class

    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    config = Config()
    config.set("errorlog", "-")
    config.set("accesslog", "-")
    logger = gunicorn_logger_class()(config)
    try:
        logger.info("Booting worker with pid: %s", 1322)
        logger.debug("not shown at info")
        (line,) = stream.getvalue().splitlines()
        record = json.loads(line)
        assert record["logger"] == "gunicorn.error" and record["message"] == "Booting worker with pid: 1322"
        assert logging.getLogger("gunicorn.error").handlers == []
    finally:
        for name in ("gunicorn.error", "gunicorn.access"):
            logging.getLogger(name).propagate = False
