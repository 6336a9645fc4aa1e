"""Controllers: provisioning (launch nodes for pending pods) and the node lifecycle controllers.

Each controller takes its dependencies injected (a :class:`~provisioner.kube.api.KubeAPI`, the
cluster state cache, a CloudProvider, a Clock, an EventRecorder) so component tests run them
against fakes with a fake clock.
"""
