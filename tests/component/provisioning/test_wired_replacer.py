"""The Replacer ``groupless controller`` wires holds room for every expiring node's pods.

Three one-pod nodes expiring in the same resync must get three replacements through the
adapter ``ControllerProcess`` hands to the expiration controller, the only replacement path.
"""

from .harness import Cluster
from .test_failures import provisioner_with
from .test_replacement_reservations import disrupt, one_pod_nodes


def test_the_process_wires_the_controllers_replace():
    cluster = Cluster(provisioner=provisioner_with(), through_process=True)
    assert cluster.process.manager.expiration.replacer == cluster.process.provisioning.replace


def test_wired_replacer_gives_nodes_expiring_together_their_own_replacements():
    cluster = Cluster(provisioner=provisioner_with(), through_process=True)
    old = one_pod_nodes(cluster, 3, "3")  # 3 CPU: one pod per m5.xlarge
    got = []
    for name, pod in old:
        disrupt(cluster, name)
        got.append(cluster.replacer([pod], name))
    assert all(len(names) == 1 for names in got), got
    replacements = {names[0] for names in got}
    assert len(replacements) == 3
    assert not replacements & {name for name, _ in old}
    assert len(cluster.cloud.create_calls) == 6  # three old nodes, three replacements
