"""Test harness: a FakeKubeAPI cluster with the walkthrough's Provisioner, a fake cloud, a controller."""

import copy
from pathlib import Path

import yaml

from provisioner.app.controller import ControllerProcess
from provisioner.clock import FakeClock
from provisioner.cloudprovider.fake import FakeCloudProvider
from provisioner.controllers.provisioning import ProvisioningController
from provisioner.kube.events import EventRecorder
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model import labels as wk
from provisioner.settings import NodeDefaults, ProvisioningSettings, from_mapping
from provisioner.state import ClusterState
from tests.builders.catalog import fake_cloud_catalog, fake_cloud_r6gd_xlarge

#: Copies of shared/walkthrough/01-provisioner.yaml and 02-inflate-deployment.yaml (CI has no shared/).
WALKTHROUGH = Path(__file__).parent / "walkthrough"
ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")


def walkthrough(name):
    return yaml.safe_load((WALKTHROUGH / name).read_text())


#: the fake cloud's r6gd.xlarge and catalog, shared with the other tiers
r6gd_xlarge = fake_cloud_r6gd_xlarge
catalog = fake_cloud_catalog


class Cluster:
    """The walkthrough's cluster around one provisioning controller.

    ``through_process=True`` builds the controller as ``groupless controller`` does
    (:class:`ControllerProcess` over this API, cloud and clock, settings from flags); then
    ``replacer`` is the very Replacer the process hands to the expiration controller.
    Otherwise ``replacer`` is the controller's own ``replace``.
    """

    def __init__(self, settings=None, provisioner=None, instance_types=None, *, through_process=False):
        self.clock = FakeClock()
        self.api = FakeKubeAPI(self.clock)
        self.cloud = FakeCloudProvider(
            instance_types if instance_types is not None else catalog(), clock=self.clock
        )
        self.recorder = EventRecorder(self.api, clock=self.clock, instance="test")
        if through_process:
            assert settings is None, "the process takes its settings from flags"
            flags = {"cloud_provider": "fake", "node_annotations": "kwok.x-k8s.io/node=fake"}
            self.process = ControllerProcess(from_mapping(flags), self.api, self.cloud, self.clock)
            self.state = self.process.state
            self.controller = self.process.provisioning
            self.replacer = self.process.manager.expiration.replacer
        else:
            self.state = ClusterState(self.api, self.clock)
            self.controller = ProvisioningController(
                self.api,
                self.state,
                self.cloud,
                self.clock,
                self.recorder,
                settings or ProvisioningSettings(nodes=NodeDefaults(annotations={"kwok.x-k8s.io/node": "fake"})),
            )
            self.replacer = self.controller.replace
        self.provisioner = self.api.create("Provisioner", provisioner or walkthrough("01-provisioner.yaml"))
        self.state.resync()
        # the cache follows the API synchronously; tests that need it to lag call this and pump
        self.stop_following = self.api.subscribe(self.state.handle)
        self.controller.watch_state()
        self._n = 0

    def pending_pod(self, template=None, name=None, cpu=None):
        """A pod as kube-scheduler leaves it: PodScheduled=False, reason Unschedulable."""
        tpl = copy.deepcopy(template or walkthrough("02-inflate-deployment.yaml")["spec"]["template"])
        self._n += 1
        meta = tpl.get("metadata", {})
        meta["name"] = name or f"inflate-{self._n:05d}"
        meta["namespace"] = "default"
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "inflate-6b88c9fb68",
                "uid": "rs-1",
                "controller": True,
            }
        ]
        if cpu is not None:
            tpl["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        pod = {
            "metadata": meta,
            "spec": tpl["spec"],
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/0 nodes are available",
                    }
                ],
            },
        }
        return self.api.create("Pod", pod)

    def nodes(self):
        return self.api.list("Node")[0]


__all__ = ["Cluster", "catalog", "r6gd_xlarge", "walkthrough", "wk"]
