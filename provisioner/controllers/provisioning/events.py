"""Events the provisioning controller records on Provisioners and pods."""

from __future__ import annotations

from provisioner.kube.events import EventRecorder
from provisioner.model import labels as wk
from provisioner.state.cluster import Snapshot


def provisioner_event(
    recorder: EventRecorder, name: str, snapshot: Snapshot, type_: str, reason: str, message: str
) -> None:
    """Record an Event on Provisioner ``name`` (``type_``: ``Normal`` or ``Warning``).

    The snapshot's object when it has one (so the Event names its UID), else a reference by name.
    """
    obj = snapshot.provisioner_objects.get(name) or {
        "apiVersion": wk.API_VERSION,
        "kind": wk.KIND,
        "metadata": {"name": name},
    }
    recorder.event(obj, type_, reason, message)

