"""A pod that no Provisioner can serve stays Pending, and its events say why."""

from __future__ import annotations

import copy
import sys
import time
import uuid

from localcluster.cluster import LocalCluster
from localcluster.walkthrough import Observer, load_manifest, walkthrough_source

#: ../shared/walkthrough/ when it is beside the clone (CI), else the copy shipped in the package
MANIFESTS = walkthrough_source(prefer_shared=True)


def test_pod_no_provisioner_can_serve_stays_pending_with_an_explaining_event(cluster: LocalCluster) -> None:
    watch = Observer(cluster)
    provisioner = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    provisioner["metadata"]["name"] = "unservable"
    watch.apply(provisioner)
    name = f"wants-s390x-{uuid.uuid4().hex[:5]}"
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {
            # the Provisioner allows arm64 and amd64 only
            "nodeSelector": {"kubernetes.io/arch": "s390x"},
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }
    try:
        watch.apply(pod)
        started = time.monotonic()

        def explained() -> list[str]:
            messages = [
                f"{e['type']} {e['reason']}: {e['message']}" for e in watch.events(kind="Pod", name=name)
                if e["type"] == "Warning"
            ]
            return [m for m in messages if "s390x" in m or "kubernetes.io/arch" in m or "rovisioner" in m]

        messages = watch.wait_for(explained, 60, f"a Warning event on {name} that explains it")
        print(f"\n[e2e] events of {name}: {messages}", file=sys.stderr)
        # past a full batch window (max 10 s) nothing has been launched for it
        time.sleep(max(0.0, 12 - (time.monotonic() - started)))
        got = cluster.kubectl_json("get", "pod", name)
        assert got["status"].get("phase") == "Pending" and not got["spec"].get("nodeName")
        assert not watch.nodes("unservable")
    finally:
        cluster.kubectl("delete", "pod", name, "--wait=false", check=False)
        cluster.kubectl("delete", "provisioners.karpenter.sh", "unservable", check=False)
