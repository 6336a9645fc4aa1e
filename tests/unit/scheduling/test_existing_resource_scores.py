"""Among existing nodes that take a pod, the plan follows kube-scheduler's resource scores and the extender's.

kube-scheduler adds NodeResourcesFit (LeastAllocated, weight 1), NodeResourcesBalancedAllocation
(weight 1) and the Groupless extender's score (0..10, × weight 5 × 10) to the preference scores
(``test_existing_preferences.py``). The expected scores below are worked out by hand from
kube-scheduler's formulas (``least_allocated.go``, ``balanced_allocation.go``) and the
extender's packing rule; plans go through Node and Pod manifests, the shared node views and the
one solver-input builder.

Units: milli-CPU and bytes; MiB = 2**20 bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from provisioner.model.labels import ZONE
from provisioner.scheduling.extenderscore import EXTENDER_SCALE, EXTENDER_WEIGHT, packing, packing_priority
from provisioner.scheduling.solver.existing import scored_defaults
from provisioner.scheduling.solver.scores import balanced_allocation, least_allocated, least_requested
from tests.builders.catalog import instance_type
from tests.builders.nodes import node_manifest
from tests.builders.plans import on_existing, plan_of
from tests.builders.pods import manifest
from tests.builders.provisioners import provisioner

MIB = 2**20
HOSTNAME = "kubernetes.io/hostname"
A = "ap-south-1a"
AMD64_OD = (("karpenter.sh/capacity-type", "In", ("on-demand",)), ("kubernetes.io/arch", "In", ("amd64",)))
PROVISIONER = provisioner(requirements=AMD64_OD)
TYPES = {"default": [instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202)]}
#: The kwok catalog's allocatable (``provisioner/cloudprovider/data/``), as the differential test's nodes have it.
M5_XLARGE = {"cpu": "3820m", "memory": f"{14062 * MIB}", "pods": "58"}
M5_2XLARGE = {"cpu": "7810m", "memory": f"{29217 * MIB}", "pods": "58"}
REPO = Path(__file__).resolve().parents[3]


def node(name: str, allocatable: dict[str, str]) -> dict[str, Any]:
    return node_manifest(name, provisioner="default", labels={ZONE: A, HOSTNAME: name}, allocatable=allocatable,
                         ready=True)


def running(name: str, node_name: str, cpu: str | None, memory: str | None) -> dict[str, Any]:
    """A Running pod on ``node_name``; ``cpu``/``memory`` None: that request missing."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return manifest(name, spec={"nodeName": node_name, "containers": [
        {"name": "app", "image": "x", "resources": {"requests": requests}}]}, status={"phase": "Running"})


# ----------------------------------------------------------------------------- the formulas, exact
def test_least_allocated_is_the_mean_unused_share_truncated():
    # cpu (7810 - 850) x 100 // 7810 = 89; memory (29217 - 2176) x 100 // 29217 = 92; (89 + 92) // 2 = 90
    assert least_allocated(850, 2176 * MIB, 7810, 29217 * MIB) == 90
    # cpu 2470 x 100 // 3820 = 64; memory 11374 x 100 // 14062 = 80; 144 // 2 = 72
    assert least_allocated(1350, 2688 * MIB, 3820, 14062 * MIB) == 72
    # requested above allocatable, or nothing allocatable: 0 for that resource
    assert least_requested(5000, 4000) == 0
    assert least_requested(100, 0) == 0
    assert least_allocated(5000, 0, 4000, 16384 * MIB) == 50
    assert least_allocated(0, 0, 4000, 16384 * MIB) == 100


def test_balanced_allocation_is_one_minus_half_the_fraction_gap():
    # 850 / 7810 = 0.10883, 2176 / 29217 = 0.07448: (1 - 0.01718) x 100 = 98.28 -> 98
    assert balanced_allocation(850, 2176 * MIB, 7810, 29217 * MIB) == 98
    # 1350 / 3820 = 0.35340, 2688 / 14062 = 0.19115: (1 - 0.08112) x 100 = 91.89 -> 91
    assert balanced_allocation(1350, 2688 * MIB, 3820, 14062 * MIB) == 91
    # fractions capped at 1: cpu 2.0 -> 1.0, memory 0.5: (1 - 0.25) x 100 = 75
    assert balanced_allocation(8000, 8192 * MIB, 4000, 16384 * MIB) == 75
    # one resource reported: no deviation
    assert balanced_allocation(1000, 0, 4000, 0) == 100


def test_scored_defaults_fill_missing_requests_only():
    assert scored_defaults(0, 0) == (100, 200 * MIB)
    assert scored_defaults(250, 0) == (0, 200 * MIB)
    assert scored_defaults(250, 64 * MIB) == (0, 0)


def test_extender_packing_priority_and_scale():
    # (850 / 7810 + 2176 / 29217) / 2 = 0.0917: no whole quarter in use -> 1
    assert packing_priority(packing(850, 2176 * MIB, 1 / 7810, 1 / (29217 * MIB), 0.5)) == 1
    # (0.3534 + 0.1912) / 2 = 0.2723: one quarter -> 3
    assert packing_priority(packing(1350, 2688 * MIB, 1 / 3820, 1 / (14062 * MIB), 0.5)) == 3
    # full: at most 7
    assert packing_priority(packing(4000, 16384 * MIB, 1 / 4000, 1 / (16384 * MIB), 0.5)) == 7
    assert EXTENDER_SCALE == EXTENDER_WEIGHT * 10


def test_extender_weight_is_the_deployed_scheduler_configurations():
    config = yaml.safe_load((REPO / "deploy" / "scheduler" / "kube-scheduler-config.yaml").read_text())
    assert [e["weight"] for e in config["extenders"]] == [EXTENDER_WEIGHT]


# ----------------------------------------------------------------------------- plans
def test_differential_seed_2039_the_fuller_m5_xlarge_wins():
    # Seed 2039's first pod the plan and kube-scheduler placed apart: existing-1 (m5.2xlarge,
    # a DaemonSet pod 100m / 128Mi) and existing-2 (m5.xlarge, the DaemonSet pod and a filler
    # 500m / 512Mi); the pod requests 750m / 2Gi, tolerates nothing that matters, prefers nothing.
    # existing-1: LeastAllocated 90 + BalancedAllocation 98 + extender 1 x 50 = 238
    # existing-2: LeastAllocated 72 + BalancedAllocation 91 + extender 3 x 50 = 313
    # (TaintToleration and NodeAffinity equal): kube-scheduler bound it to existing-2, the plan
    # took the first by name before
    nodes = [node("existing-1", M5_2XLARGE), node("existing-2", M5_XLARGE)]
    bound = [running("agent-1", "existing-1", "100m", "128Mi"), running("agent-2", "existing-2", "100m", "128Mi"),
             running("filler", "existing-2", "500m", "512Mi")]
    pending = [manifest("g1-toleration-0", cpu="750m", memory="2Gi")]
    result = plan_of(pending, [PROVISIONER], TYPES, nodes=nodes, running=bound)
    assert on_existing(result) == {"existing-2": ["g1-toleration-0"]}
    assert result.new_nodes == ()


def test_requests_missing_on_running_pods_count_at_kube_schedulers_defaults():
    # Alike nodes; n-a runs a pod without requests. The pending pod requests 500m / 1Gi.
    # n-a: LeastAllocated counts 600m and 1224Mi: cpu 85, memory 92 -> 88; n-b: cpu 87, memory 93 -> 90.
    # BalancedAllocation (real requests) 96 and the extender's 1 on both: n-b wins 236 to 234
    alike = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    nodes = [node("n-a", alike), node("n-b", alike)]
    bound = [running("best-effort", "n-a", None, None)]
    result = plan_of([manifest("w", cpu="500m", memory="1Gi")], [PROVISIONER], TYPES, nodes=nodes, running=bound)
    assert on_existing(result) == {"n-b": ["w"]}


def test_equal_totals_go_to_the_first_node_by_name():
    # kube-scheduler picks among equal totals at random; the plan keeps the order tried
    alike = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    result = plan_of([manifest("w", cpu="500m", memory="1Gi")], [PROVISIONER], TYPES,
                     nodes=[node("n-b", alike), node("n-a", alike)])
    assert on_existing(result) == {"n-a": ["w"]}
