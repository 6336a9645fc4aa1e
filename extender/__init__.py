"""The kube-scheduler extender: Groupless' rules inside every scheduling decision.

- :mod:`extender.handlers`: pure ``filter(args, state, now)`` and ``prioritize(args, state, now)``;
- :mod:`extender.state`: the read-only cluster view they decide on, and its builders;
- :mod:`extender.live`: keeps that view current from the cluster state cache;
- :mod:`extender.app`: the flask app (``/filter``, ``/prioritize``, ``/healthz``, ``/metrics``);
- :mod:`extender.cli`: ``groupless extender``.

Registration with kube-scheduler and the reasons behind each setting: ``deploy/scheduler/``.
"""
