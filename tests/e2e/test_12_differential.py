"""The differential test: the plan against the real kube-scheduler, for a fixed set of seeded workloads.

Each workload (:func:`localcluster.differential.workload.generate`, 50 pods) is planned by the
production builder and solver, its planned nodes are launched on kwok as the provisioning
controller launches them, and kube-scheduler (with the Groupless extender) binds the pods
(:class:`localcluster.differential.driver.Driver`). Every pod must agree
(:mod:`localcluster.differential.agreement`); a failure prints each disagreement with its cause.

One local cluster serves every seed (each workload cleans up after itself). Its Groupless
controller is not started: the webhook and the extender run, and nothing launches on its own.
``benchmarks/differential.py`` runs the same harness over more and larger workloads.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator

import pytest

from localcluster.cluster import LocalCluster, Settings
from localcluster.differential.driver import Driver, Outcome, describe
from localcluster.differential.workload import CONSTRAINTS, REQUEST_STYLES, generate
from tests.e2e.conftest import module_cluster

#: The fixed workloads: seeds and pods per workload.
SEEDS = tuple(range(10))
PODS = 50

outcomes: dict[int, Outcome] = {}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A local cluster without the Groupless controller (webhook and extender only), stopped after this module."""
    with module_cluster("differential", Settings(cloud_provider="kwok", controller=False)) as local:
        yield local


@pytest.fixture(scope="module")
def driver(cluster: LocalCluster) -> Iterator[Driver]:
    runner = Driver(cluster, progress=lambda line: print(f"[differential] {line}", file=sys.stderr, flush=True))
    try:
        yield runner
    finally:
        runner.close()


def test_the_fixed_workloads_draw_every_constraint_kind_and_existing_nodes() -> None:
    drawn: Counter[str] = Counter()
    for seed in SEEDS:
        drawn.update(generate(seed, PODS).features)
    assert {f"constraint:{c}" for c in CONSTRAINTS} <= set(drawn), sorted(drawn)
    assert {f"style:{s}" for s in REQUEST_STYLES} <= set(drawn), sorted(drawn)
    for part in ("existing-node", "daemonset", "limit-range", "dedicated-provisioner", "filler-counted"):
        assert drawn[part] > 0, part


@pytest.mark.parametrize("seed", SEEDS)
def test_kube_scheduler_binds_every_pod_where_the_plan_put_it(driver: Driver, seed: int) -> None:
    outcome = driver.run(generate(seed, PODS))
    outcomes[seed] = outcome
    report = describe(outcome)
    print(f"\n{report}", file=sys.stderr)
    assert outcome.agreement.total == PODS
    assert outcome.agreement.disagreements == [], report


def test_existing_room_was_used_by_both_and_launched_for_by_neither() -> None:
    """The reverse check: pods the plan put on existing nodes were bound there, none launched for."""
    assert set(outcomes) == set(SEEDS), "every seed ran"
    on_existing = [v for o in outcomes.values() for v in o.agreement.verdicts
                   if v.planned is not None and v.planned not in o.launched]
    assert on_existing, "some pods of the fixed set are planned on existing nodes"
    assert all(v.agrees for v in on_existing), [v.cause for v in on_existing if not v.agrees]
