"""Taint rules: the ephemeral keys, strict and tolerant decoding, and what a launching node hides."""

from __future__ import annotations

import pytest

from provisioner.api.types import Taint as ApiTaint
from provisioner.model.taints import (
    EPHEMERAL_TAINT_KEYS,
    UNSCHEDULABLE_TAINT_KEY,
    Taint,
    decode_taints,
    has_taint,
    is_disrupted,
    readable_taints,
    scheduling_taints,
    with_cordon,
)

NOT_READY = Taint("karpenter.sh/not-ready", "NoSchedule")
KUBE_NOT_READY = Taint("node.kubernetes.io/not-ready", "NoExecute")
UNINITIALIZED = Taint("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule", "true")
DEDICATED = Taint("dedicated", "NoSchedule", "gpu")
AGENT = Taint("example.com/agent-not-ready", "NoExecute")


def test_ephemeral_keys_are_karpenters_known_ephemeral_taints() -> None:
    assert EPHEMERAL_TAINT_KEYS == {
        "karpenter.sh/not-ready", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized"}
    assert ApiTaint is Taint  # api.types re-exports the one value type


def test_a_launching_node_hides_ephemeral_and_startup_taints() -> None:
    taints = (NOT_READY, KUBE_NOT_READY, UNINITIALIZED, DEDICATED, AGENT)
    startup = [Taint("example.com/agent-not-ready", "NoExecute", "other-value")]
    assert scheduling_taints(taints, initialized=False, startup_taints=startup) == (DEDICATED,)
    # a startup taint matches on key and effect: another effect stays
    assert scheduling_taints((Taint("example.com/agent-not-ready", "NoSchedule"),), initialized=False,
                             startup_taints=startup) == (Taint("example.com/agent-not-ready", "NoSchedule"),)
    assert scheduling_taints(taints, initialized=True, startup_taints=startup) is taints


def test_cordon_adds_the_unschedulable_taint_once() -> None:
    assert with_cordon((DEDICATED,), True) == (DEDICATED, Taint(UNSCHEDULABLE_TAINT_KEY, "NoSchedule"))
    cordoned = (Taint(UNSCHEDULABLE_TAINT_KEY, "NoSchedule"),)
    assert with_cordon(cordoned, True) is cordoned
    assert with_cordon((DEDICATED,), False) == (DEDICATED,)


def test_decoding_strict_and_tolerant() -> None:
    raw = [{"key": "dedicated", "effect": "NoSchedule", "value": "gpu"},
           {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    assert decode_taints(raw) == readable_taints(raw) == (DEDICATED, Taint("karpenter.sh/disrupted", "NoSchedule"))
    assert is_disrupted(decode_taints(raw)) and has_taint(decode_taints(raw), "dedicated")
    assert not is_disrupted((DEDICATED,))
    odd = ["not-a-taint", {"key": "k", "effect": "NoSchedule"}, {"key": 5}]
    assert readable_taints(odd) == (Taint("k", "NoSchedule"),)
    assert readable_taints("x") == () and decode_taints(None) == ()
    with pytest.raises(ValueError, match=r"^node n: spec.taints\[0\]: expected \{key, effect\}, got 'not-a-taint'$"):
        decode_taints(odd, "node n: spec.taints")
    with pytest.raises(ValueError, match=r"spec.taints: expected a list"):
        decode_taints({"key": "k"})
