"""The differential test against the real kube-scheduler.

Groupless plans nodes on the assumption that kube-scheduler will bind each pod where the plan
put it. This package checks that assumption on the local control plane, which runs the real
kube-scheduler (with the Groupless extender):

* :mod:`.workload`: seeded random workloads (pods, Provisioners, DaemonSets, LimitRanges,
  volumes, existing nodes) mixing every constraint kind the solver handles;
* :mod:`.agreement`: the rule that says whether a pod's binding agrees with the plan (pure);
* :mod:`.driver`: plans a workload with the production builder and solver, creates the planned
  nodes as the provisioning controller would (kwok Nodes), lets kube-scheduler bind the pods
  and compares.

The e2e test ``tests/e2e/test_12_differential.py`` and the benchmark
``benchmarks/differential.py`` run it.
"""
