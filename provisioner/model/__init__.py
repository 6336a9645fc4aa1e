"""The bottom layer: pure values every other part reads.

Quantities (milli-CPU, bytes), resource lists, the requirements algebra, well-known labels and
the nominations codec. Nothing here imports another Groupless package, an I/O library or the
Kubernetes client; ``provisioner.api`` (the Provisioner types) and ``provisioner.scheduling``
(the solver) build on it.
"""
