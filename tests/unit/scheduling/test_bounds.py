"""The benchmarks' cost bounds: the pod-share bound keeps pods whole where the fluid ones do not."""

from __future__ import annotations

import pytest

from benchmarks.bounds import lower_bound, lp_bound, pod_share_bound, resource_bound
from provisioner.api.types import Provisioner, ProvisionerSpec
from provisioner.scheduling.solver import SolverInput, solve
from tests.builders.catalog import instance_type
from tests.builders.pods import pod

# cheap cpu with almost no memory, and memory-rich nodes with little cpu
MICRO = instance_type("micro", "amd64", 2000, 256, 100, 2000, 256, 1.0)
HIGHMEM = instance_type("highmem", "amd64", 1000, 8192, 100, 1000, 8192, 2.0)


def test_pods_that_bring_memory_cannot_use_the_cheap_cpu_of_a_memory_light_type():
    pods = [pod(f"p{i}", cpu="1", memory="1Gi") for i in range(2)]
    types = [MICRO, HIGHMEM]
    # fluid: cpu from micro (2 vCPU/$), memory from highmem: 8/9 micro + 2/9 highmem = 4/3 $/h
    assert lp_bound(pods, types) == pytest.approx(4 / 3)
    assert resource_bound(pods, types) == pytest.approx(1.0)
    # whole pods: neither fits a micro, each takes all the cpu of a highmem node
    assert pod_share_bound(pods, types) == pytest.approx(4.0)
    assert lower_bound(pods, types) == pytest.approx(4.0)
    plan = solve(SolverInput(pods=pods, provisioners=[Provisioner(name="default", spec=ProvisionerSpec())],
                             instance_types={"default": types}))
    assert plan.total_price == pytest.approx(4.0)  # the bound is reached: two highmem nodes


def test_the_bounds_stay_under_the_plan_on_a_mixed_workload():
    pods = ([pod(f"c{i}", cpu="900m", memory="100Mi") for i in range(5)]
            + [pod(f"m{i}", cpu="200m", memory="3Gi") for i in range(5)])
    types = [MICRO, HIGHMEM, instance_type("mixed", "amd64", 4000, 8192, 100, 4000, 8192, 3.0)]
    plan = solve(SolverInput(pods=pods, provisioners=[Provisioner(name="default", spec=ProvisionerSpec())],
                             instance_types={"default": types}))
    share, fluid = pod_share_bound(pods, types), lp_bound(pods, types)
    assert 0 < share <= plan.total_price + 1e-9
    # neither bound dominates the other (here the LP is the tighter one): the benchmarks take the max
    assert lower_bound(pods, types) == pytest.approx(max(share, fluid, resource_bound(pods, types)))
    assert lower_bound(pods, types) <= plan.total_price + 1e-9
