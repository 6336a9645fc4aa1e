from __future__ import annotations

from provisioner.clock import FakeClock
from provisioner.controllers.leaderelection import LeaderElector, lease_holder
from provisioner.kube.api import ConflictError
from provisioner.kube.fake import FakeKubeAPI


def electors(clock: FakeClock, kube: FakeKubeAPI) -> tuple[LeaderElector, LeaderElector]:
    make = lambda who: LeaderElector(kube, clock, name="groupless", namespace="kube-system", identity=who,  # noqa: E731
                                     lease_duration=15, renew_deadline=10, retry_period=2)
    return make("a"), make("b")


def test_only_one_replica_leads_and_the_other_takes_over_after_expiry() -> None:
    clock = FakeClock()
    kube = FakeKubeAPI(clock)
    a, b = electors(clock, kube)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    lease = kube.get("Lease", "groupless", "kube-system")
    assert lease_holder(lease) == "a"
    assert lease["spec"]["leaseDurationSeconds"] == 15 and lease["spec"]["leaseTransitions"] == 0
    for _ in range(10):  # a renews every 2 s: b never gets it
        clock.advance(2)
        assert a.try_acquire_or_renew() is True
        assert b.try_acquire_or_renew() is False
    # a dies; b must observe an unchanged record for a whole lease duration
    clock.advance(14)
    assert b.try_acquire_or_renew() is False
    clock.advance(1)
    assert b.try_acquire_or_renew() is True
    lease = kube.get("Lease", "groupless", "kube-system")
    assert lease_holder(lease) == "b" and lease["spec"]["leaseTransitions"] == 1
    # a comes back: it is no longer leader once its renew deadline passed
    assert a.try_acquire_or_renew() is False
    assert a.is_leader is False


def test_release_hands_over_at_once() -> None:
    clock = FakeClock()
    kube = FakeKubeAPI(clock)
    a, b = electors(clock, kube)
    assert a.try_acquire_or_renew()
    a.release()
    assert lease_holder(kube.get("Lease", "groupless", "kube-system")) == ""
    assert b.try_acquire_or_renew() is True


def test_racing_candidates_one_wins_by_resource_version() -> None:
    clock = FakeClock()
    kube = FakeKubeAPI(clock)
    a, b = electors(clock, kube)
    assert a.try_acquire_or_renew()
    a.release()
    kube.fail_next[("replace", "Lease")] = [ConflictError("stale")]
    assert b.try_acquire_or_renew() is False  # lost the race
    assert b.try_acquire_or_renew() is True
