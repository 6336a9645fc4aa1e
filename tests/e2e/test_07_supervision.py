"""The dev cluster restarts a Groupless component that dies: kill -9 the controller, see it back.

``groupless dev-cluster status`` (run as a user would, from another process) reports the new
pid and the restart count, and provisioning works again: a pod that needs a new node Runs.
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass

from localcluster.cluster import LocalCluster
from localcluster.walkthrough import Observer, load_manifest, walkthrough_source

#: ../shared/walkthrough/ when it is beside the clone (CI), else the copy shipped in the package
MANIFESTS = walkthrough_source(prefer_shared=True)


@dataclass(frozen=True)
class Line:
    pid: str
    state: str
    restarts: str


def status(cluster: LocalCluster) -> dict[str, Line]:
    """``groupless dev-cluster status`` parsed: component -> (pid, state, restarts)."""
    out = subprocess.run([sys.executable, "-m", "provisioner.cli", "dev-cluster", "status", "--name", cluster.name],
                         capture_output=True, text=True, timeout=60).stdout
    lines = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 6 and words[1] == "pid" and words[4] == "restarts":
            lines[words[0]] = Line(words[2], words[3], words[5])
    return lines


def test_a_killed_controller_is_restarted_and_provisions_again(cluster: LocalCluster) -> None:
    watch = Observer(cluster)
    before = status(cluster)
    assert {"webhook", "extender", "controller"} <= set(before), before
    controller = before["controller"]
    assert controller.state == "running" and controller.pid.isdigit(), controller
    watch.controller_log.skip()

    os.kill(int(controller.pid), signal.SIGKILL)

    def restarted() -> Line | None:
        now = status(cluster).get("controller")
        return now if now and now.state == "running" and now.pid != controller.pid else None

    after: Line = watch.wait_for(restarted, 60, "dev-cluster status to show the controller running again")
    assert int(after.restarts) == int(controller.restarts) + 1, (controller, after)
    assert _alive(int(after.pid)) and not _alive(int(controller.pid))
    log = "\n".join(watch.controller_log.read())
    assert "supervisor: controller exited (killed by SIGKILL)" in log, log[-2000:]
    assert f"supervisor: controller restarted (restart {after.restarts}), pid {after.pid}" in log, log[-2000:]

    provisioner = copy.deepcopy(load_manifest("01-provisioner.yaml", MANIFESTS))
    provisioner["metadata"]["name"] = "supervision"
    name = f"after-restart-{uuid.uuid4().hex[:5]}"
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"karpenter.sh/provisioner-name": "supervision"},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m"}}}],
        },
    }
    try:
        watch.apply(provisioner)
        watch.apply(pod)
        running = watch.wait_for(
            lambda: watch.running([cluster.kubectl_json("get", "pod", name)]), 120,
            f"pod {name} to Run on a node the restarted controller launched",
        )
        node = running[0]["spec"]["nodeName"]
        assert node in {n["metadata"]["name"] for n in watch.nodes("supervision")}, node
        print(f"\n[e2e] controller restarted (pid {controller.pid} -> {after.pid}); {name} Running on {node}",
              file=sys.stderr)
    finally:
        cluster.kubectl("delete", "pod", name, "--wait=false", check=False)
        watch.wait_for(lambda: not cluster.kubectl("get", "pod", name, check=False).stdout.strip(), 60,
                       f"pod {name} to be deleted", interval=1)
        cluster.kubectl("delete", "provisioners.karpenter.sh", "supervision", check=False)
        watch.wait_for(lambda: not watch.nodes("supervision"), 180, "the supervision nodes to be deleted", interval=2)


def _alive(pid: int) -> bool:
    from localcluster.cluster import _process_alive

    return _process_alive(pid)
