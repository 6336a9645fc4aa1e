"""Builders shared by every test tier (in the manner of Karpenter's ``pkg/test`` and ``pkg/test/expectations``).

One place for the objects tests make, so a fact about them (what kube-scheduler writes on a pod
it cannot place, a type's allocatable memory) is spelled once:

* :mod:`tests.builders.catalog`: instance types and the two test catalogs, each with its figures;
* :mod:`tests.builders.pods`: pod manifests, the solver's ``Pod``, the ``Unschedulable`` status;
* :mod:`tests.builders.nodes`: Node manifests;
* :mod:`tests.builders.provisioners`: typed Provisioners and Provisioner manifests;
* :mod:`tests.builders.walkthrough`: the walkthrough manifests (the copy shipped in ``localcluster``);
* :mod:`tests.builders.admission` and :mod:`tests.builders.admission_strategies`: AdmissionReview
  requests, a valid Provisioner, JSON-patch decoding, and hypothesis strategies for the webhook;
* :mod:`tests.builders.expectations`: waiting on an observable instead of sleeping.
"""
