"""The tags every launch puts on its instance, and how a listed instance's tags are read back.

Why tags: launching is two steps (the instance, then its Node object), and a controller that dies
in between, or whose Node write is refused, must not leave capacity nobody knows how to use. The
instance is tagged in the same call that launches it (CreateFleet's ``TagSpecifications``), so
whatever a restarted controller needs to write the Node travels with it: the Provisioner, the
node request, and the :class:`~provisioner.cloudprovider.types.LaunchRecord` (labels and taints
the node was bootstrapped with). Adoption (:mod:`provisioner.controllers.provisioning.adoption`)
reads them through :func:`read_launch_tags`. Every provider that keeps tags (EC2, the in-memory
fake) writes them with :func:`launch_tags`, so each reads back the same thing.

Encoding: labels as kubelet's ``--node-labels`` (``key=value,key=value``, sorted), taints as
``--register-with-taints`` (``key=value:Effect,key:Effect``). EC2 limits a tag value to 256
characters (and an instance to 50 tags), so a long value is split over ``<key>``, ``<key>-2``,
... ``<key>-8``; a record longer than that raises ConfigurationError before anything launches.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from provisioner.cloudprovider.types import ConfigurationError, LaunchRecord, NodeRequest
from provisioner.model import labels as wk
from provisioner.model.taints import Taint, decode_taints

log = logging.getLogger(__name__)

#: The tag holding the record's labels (``key=value,...``), continued in ``-2`` .. ``-8``.
LABELS_TAG = "groupless.dev/node-labels"
#: The tag holding the record's taints (``key=value:Effect,...``), continued in ``-2`` .. ``-8``.
TAINTS_TAG = "groupless.dev/node-taints"
#: EC2's longest tag value, in characters.
MAX_TAG_VALUE = 256
#: Most tags one encoded value may take.
MAX_CHUNKS = 8

#: Labels the instance decides (its type, zone, capacity type, ...), read back from it, never recorded.
IMPLIED_LABELS = wk.WELL_KNOWN_LABELS | wk.AWS_INSTANCE_LABELS


def record_of(request: NodeRequest) -> LaunchRecord:
    """What ``request`` asks of its node beyond what the instance decides (see :class:`LaunchRecord`)."""
    labels = {k: v for k, v in request.labels.items() if k not in IMPLIED_LABELS}
    return LaunchRecord(labels=labels, taints=decode_taints(list(request.taints), "node request taints"))


def format_labels(labels: Mapping[str, str]) -> str:
    """``key=value,...`` sorted by key (kubelet's ``--node-labels``)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def parse_labels(text: str) -> dict[str, str]:
    """The inverse of :func:`format_labels`; ValueError naming the item without ``=``."""
    result: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"label {item!r}: expected key=value")
        result[key] = value
    return result


def format_taints(taints: tuple[Taint, ...]) -> str:
    """``key=value:Effect`` or ``key:Effect``, comma-separated in order (kubelet's ``--register-with-taints``)."""
    return ",".join(f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in taints)


def parse_taints(text: str) -> tuple[Taint, ...]:
    """The inverse of :func:`format_taints`; ValueError naming the item without a key or an effect."""
    result = []
    for item in filter(None, text.split(",")):
        rest, sep, effect = item.rpartition(":")
        key, _, value = rest.partition("=")
        if not sep or not key or not effect:
            raise ValueError(f"taint {item!r}: expected key=value:Effect or key:Effect")
        result.append(Taint(key, effect, value))
    return tuple(result)


def _split(key: str, text: str) -> dict[str, str]:
    chunks = [text[i:i + MAX_TAG_VALUE] for i in range(0, len(text), MAX_TAG_VALUE)] or [""]
    if len(chunks) > MAX_CHUNKS:
        raise ConfigurationError(
            f"tag {key}: the node's {key.rsplit('-', 1)[-1]} take {len(text)} characters; at most "
            f"{MAX_CHUNKS * MAX_TAG_VALUE} fit in the instance's tags (shorten the Provisioner's labels or taints)"
        )
    return {(key if i == 0 else f"{key}-{i + 1}"): chunk for i, chunk in enumerate(chunks)}


def _joined(tags: Mapping[str, str], key: str) -> str | None:
    if key not in tags:
        return None
    parts = [tags[key]]
    for i in range(2, MAX_CHUNKS + 1):
        more = tags.get(f"{key}-{i}")
        if more is None:
            break
        parts.append(more)
    return "".join(parts)


def launch_tags(request: NodeRequest) -> dict[str, str]:
    """The tags of ``request``'s instance: its Provisioner, its id and its :class:`LaunchRecord`.

    Raises ConfigurationError when the record does not fit in :data:`MAX_CHUNKS` tags per value.
    """
    record = record_of(request)
    return {
        wk.PROVISIONER_NAME: request.provisioner.name,
        wk.NODE_REQUEST_TAG: request.id,
        **_split(LABELS_TAG, format_labels(record.labels)),
        **_split(TAINTS_TAG, format_taints(record.taints)),
    }


def read_launch_tags(tags: Mapping[str, str]) -> tuple[str | None, str | None, LaunchRecord | None]:
    """``(Provisioner name, node request id, record)`` from an instance's tags; None for each one absent.

    A record that cannot be read (tags edited by hand) is logged and read as absent: the Node is
    then built from the Provisioner as it is now.
    """
    provisioner = tags.get(wk.PROVISIONER_NAME) or None
    request_id = tags.get(wk.NODE_REQUEST_TAG) or None
    labels, taints = _joined(tags, LABELS_TAG), _joined(tags, TAINTS_TAG)
    if labels is None and taints is None:
        return provisioner, request_id, None
    try:
        record = LaunchRecord(labels=parse_labels(labels or ""), taints=parse_taints(taints or ""))
    except ValueError as error:
        log.warning("Ignoring the launch record of node request %s: %s", request_id, error)
        record = None
    return provisioner, request_id, record


__all__ = [
    "IMPLIED_LABELS",
    "LABELS_TAG",
    "MAX_CHUNKS",
    "MAX_TAG_VALUE",
    "TAINTS_TAG",
    "format_labels",
    "format_taints",
    "launch_tags",
    "parse_labels",
    "parse_taints",
    "read_launch_tags",
    "record_of",
]
