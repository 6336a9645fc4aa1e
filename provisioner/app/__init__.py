"""The wiring layer: processes built from the parts below it.

``controller`` assembles the ``groupless controller`` process (cluster state cache, leader
election, the provisioning loop, the lifecycle manager, the optional in-process extender,
probes and metrics). Nothing below this layer imports it; it is the one place where controllers
and the extender meet.
"""
