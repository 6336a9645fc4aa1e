"""``groupless demo``'s replay, on the cluster the whole test run shares: the narration a new user reads."""

from __future__ import annotations

import io
import re
import sys

from localcluster.cluster import LocalCluster
from localcluster.demo import Narrator, replay
from localcluster.walkthrough import walkthrough_source


def test_demo_replays_the_walkthrough_and_narrates_it(cluster: LocalCluster) -> None:
    out = io.StringIO()
    # the manifests the tests use (../shared/walkthrough/ when present), not only the embedded copy
    assert replay(cluster, Narrator(out), expiry_seconds=None, source=walkthrough_source(prefer_shared=True)) is True
    text = out.getvalue()
    print(f"\n[e2e] demo narration: {len(text.splitlines())} lines", file=sys.stderr)
    for step in range(1, 6):
        assert f"\n=== {step}. " in text
    assert "denied the request: spec.ttlSecondsAfterEmpty" in text
    assert re.search(r"ip-[\w.-]+\s+Ready\s+<none>\s+\S+\s+\S+\s+r6gd\.xlarge\s+arm64\s+on-demand", text), text
    assert "Computed packing of 1 node(s) for 3 pod(s) with instance type option(s) [r6gd.xlarge]" in text
    # the drain is narrated; whether the PDB refuses an eviction depends on how fast kwok runs the
    # replacement pods, so the refusal itself is asserted by test_02's step 3, not here
    held = re.search(r"was replaced; at least (\d+) inflate pods ran at every poll", text)
    assert held is not None and int(held.group(1)) >= 2, text
    assert "walkthrough complete" in text
    # events sorted by creation time: scheduler events (events.k8s.io/v1) have no lastTimestamp
    assert "$ kubectl get events --sort-by=.metadata.creationTimestamp" in text
