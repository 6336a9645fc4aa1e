"""The controller feeds the solver what the cluster holds: DaemonSets, volumes, Provisioner lifecycle."""

import copy

from provisioner.model import labels as wk

from .harness import Cluster, walkthrough


def inflate(cpu="1"):
    tpl = copy.deepcopy(walkthrough("02-inflate-deployment.yaml")["spec"]["template"])
    tpl["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return tpl


def daemonset(cpu):
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "node-agent", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "node-agent"}},
            "template": {
                "metadata": {"labels": {"app": "node-agent"}},
                "spec": {
                    "containers": [
                        {"name": "agent", "image": "agent", "resources": {"requests": {"cpu": cpu}}}
                    ]
                },
            },
        },
    }


def test_daemonset_overhead_is_set_aside():
    # r6gd.xlarge has 3820m allocatable: three 1-core pods fit with a 500m agent, not with a 1-core one
    small = Cluster()
    small.api.create("DaemonSet", daemonset("500m"))
    for _ in range(3):
        small.pending_pod()
    assert len(small.controller.reconcile().nodes) == 1

    big = Cluster()
    big.api.create("DaemonSet", daemonset("1"))
    for _ in range(3):
        big.pending_pod()
    assert len(big.controller.reconcile().nodes) == 2


def test_bound_volume_pins_the_zone():
    cluster = Cluster()
    cluster.api.create(
        "PersistentVolume",
        {
            "metadata": {"name": "pv-1"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": "default", "name": "data"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": wk.ZONE, "operator": "In", "values": ["ap-south-1b"]}
                                ]
                            }
                        ]
                    }
                },
            },
        },
    )
    cluster.api.create(
        "PersistentVolumeClaim",
        {
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "volumeName": "pv-1",
                "resources": {"requests": {"storage": "10Gi"}},
            },
            "status": {"phase": "Bound"},
        },
    )
    tpl = inflate()
    del tpl["spec"]["nodeSelector"][wk.ZONE]
    tpl["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    cluster.pending_pod(template=tpl)
    cluster.controller.reconcile()
    (node,) = cluster.nodes()
    assert node["metadata"]["labels"][wk.ZONE] == "ap-south-1b"


def test_a_provisioner_being_deleted_launches_nothing():
    cluster = Cluster()
    cluster.api.patch("Provisioner", "default", {"metadata": {"finalizers": ["example.com/hold"]}})
    cluster.api.delete("Provisioner", "default")
    pod = cluster.pending_pod()
    result = cluster.controller.reconcile()
    assert result.nodes == () and cluster.cloud.create_calls == []
    assert result.unschedulable == {f"default/{pod['metadata']['name']}": "no Provisioner exists"}
