"""``groupless demo``: the walkthrough, replayed on a local control plane, narrated.

Why a narrated replay rather than a script of kubectl commands: a user's first question is
"what does it do?", and the answer is what they would see on a real cluster -- the node table
with instance type, architecture and capacity type filled in, pods moving onto the node
launched for them, the controller's batch / packing / launch log lines, the events, and nodes
retired when empty or expired without breaking the PodDisruptionBudget. Each step prints the
command a user would type (``$ kubectl ...``) and its output.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import signal
import sys
import time
from importlib.resources.abc import Traversable
from typing import Any

from localcluster import build
from localcluster.build import BuildError
from localcluster.cluster import DEPLOY_DIR, ClusterError, LocalCluster, Settings, available_subcommands
from localcluster.walkthrough import (
    EVENTS_SORT_KEY,
    PROVISIONER_LABEL,
    Observer,
    check_walkthrough,
    node_age_seconds,
    walkthrough_source,
)
from localcluster.walkthrough import load_manifest as load_walkthrough_manifest

REQUIRED = ("webhook", "extender", "controller")

#: What the walkthrough creates, deleted before a replay (leftovers of an earlier, failed run on
#: a reused cluster) and after a failed step (so a reused cluster is left as it was found).
#: Order matters: the Deployment and the PDB go first so the Provisioner's nodes drain at once.
WALKTHROUGH_OBJECTS = (
    ("deployment", "inflate"),
    ("poddisruptionbudget", "inflate-pdb"),
    ("provisioners.karpenter.sh", "default"),
    ("provisioners.karpenter.sh", "invalid"),
)


class Narrator:
    def __init__(self, out: Any = None) -> None:
        self.out = out or sys.stdout
        self.started = time.monotonic()

    def step(self, title: str) -> None:
        print(f"\n=== {title}", file=self.out, flush=True)

    def say(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {message}", file=self.out, flush=True)

    def command(self, command: str, output: str) -> None:
        print(f"$ {command}", file=self.out)
        print(output.rstrip() if output.strip() else "(nothing)", file=self.out, flush=True)

    def log(self, lines: list[str], limit: int = 12) -> None:
        shown = [line for line in lines if "DEBUG" not in line][-limit:]
        for line in shown:
            print(f"  controller | {line}", file=self.out)
        self.out.flush()


def preflight(source: Traversable | None = None) -> list[str]:
    """Everything the demo needs that can be checked before building or starting anything.

    Returns one message per problem (empty when ready): Groupless's subcommands, the embedded
    walkthrough manifests, moto (the ``dev-cluster`` extra), the ``deploy/`` manifests (CRD,
    webhook configurations, scheduler configuration) and, when the binaries are not built yet,
    the Go toolchain. Failing here costs a second instead of a six-minute build.
    """
    problems = []
    commands = available_subcommands()
    missing = [c for c in REQUIRED if c not in commands]
    if missing:
        problems.append(f"this installation lacks `groupless {' / '.join(missing)}`; the demo needs all three")
    try:
        check_walkthrough(source)
    except FileNotFoundError as error:
        problems.append(str(error))
    if importlib.util.find_spec("moto") is None:
        problems.append("moto (the local EC2/SSM endpoint) is not installed: pip install -e '.[dev-cluster]'")
    wanted = ("crds", "webhooks", "scheduler")
    absent = [name for name in wanted if not (DEPLOY_DIR / name).is_dir()]
    if absent:
        problems.append(f"the deploy/ manifests ({', '.join(absent)}) are not in {DEPLOY_DIR}; run the demo "
                        "from a clone of the repository installed with `pip install -e '.[dev-cluster]'`")
    if not build.binaries().complete:
        try:
            build.find_go()
        except BuildError as error:
            problems.append(str(error))
    return problems


def _alive(cluster: LocalCluster) -> bool:
    """The cluster's processes run and its kube-apiserver answers /readyz."""
    if not cluster.running():
        return False
    with contextlib.suppress(ClusterError, OSError):
        return cluster.kubectl("get", "--raw=/readyz", check=False, timeout=15).returncode == 0
    return False


def run_demo(name: str = "default", keep: bool = False, expiry_seconds: int | None = None) -> int:
    """Bring the cluster ``name`` up (or reuse it), replay the walkthrough, tear down unless ``keep``.

    Returns the process exit code: 0 when every step reached its expected state, 1 when a check
    or a step failed, 130 when interrupted (Ctrl-C or SIGTERM, which get the same teardown).
    A cluster this run started is stopped unless ``keep``; on a cluster that stays running
    (reused, or ``keep``), a failed or interrupted replay deletes what it applied.
    """
    from localcluster.cli import shielded_down, terminate_like_interrupt

    say = Narrator()
    source = walkthrough_source()
    problems = preflight(source)
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    terminate_like_interrupt()
    cluster = LocalCluster(name, Settings())
    reused = cluster.running()
    replaying = False
    code = 1
    try:
        if reused:
            cluster.attach()
            if not _alive(cluster):
                raise ClusterError(
                    f"the local cluster {name!r} is registered as running but its kube-apiserver does not answer; "
                    f"stop it with `groupless dev-cluster down --name {name}` and run the demo again"
                )
            say.say(f"reusing the running local cluster {name!r}")
        else:
            if cluster.state_file.exists():
                say.say(f"the local cluster {name!r} was stopped or partly dead; starting it afresh")
            say.step("Starting a local control plane "
                     "(etcd, kube-apiserver, controller-manager, scheduler, kwok, moto, Groupless)")
            cluster.up(detach=keep, progress=say.say)
        say.say(f"walkthrough manifests from {source}")
        say.say(f'to follow along in another shell: eval "$(groupless dev-cluster env --name {name})"')
        replaying = True
        code = 0 if replay(cluster, say, expiry_seconds, source) else 1
        replaying = False
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        code = 130
    except (RuntimeError, TimeoutError, FileNotFoundError) as error:  # BuildError, ClusterError included
        if replaying and not cluster.running():
            print(f"\nerror: the local cluster {name!r} stopped while the demo ran (`groupless dev-cluster down` "
                  "in another shell?); run `groupless demo` again to start a new one", file=sys.stderr)
        elif isinstance(error, BuildError | ClusterError | FileNotFoundError):
            print(f"\nerror: {error}", file=sys.stderr)
        else:
            print(f"\nerror: the demo did not reach the expected state: {error}", file=sys.stderr)
        if replaying and cluster.logs.is_dir():  # `dev-cluster down --purge` may have removed them
            print(f"logs: {cluster.logs}", file=sys.stderr)
    finally:
        try:
            if replaying and (reused or keep) and cluster.running():
                with contextlib.suppress(KeyboardInterrupt, ClusterError, TimeoutError, OSError):
                    remove_walkthrough_objects(cluster, say, "deleting what the demo applied")
            if keep and cluster.running():
                print(f"\nThe cluster keeps running: eval \"$(groupless dev-cluster env --name {name})\"; "
                      f"stop it with `groupless dev-cluster down --name {name}`.")
            elif not reused and shielded_down(cluster):
                print("\nThe local cluster is stopped.")
        finally:
            signal.signal(signal.SIGTERM, previous_sigterm)
    return code


def remove_walkthrough_objects(cluster: LocalCluster, say: Narrator, why: str, timeout: float = 120) -> bool:
    """Delete ``WALKTHROUGH_OBJECTS`` and wait until the ``default`` Provisioner's nodes are gone.

    Returns False (and does nothing) when none of them exists. Raises TimeoutError when the
    nodes outlive ``timeout`` seconds.
    """
    watch = Observer(cluster)
    present = cluster.kubectl(
        "get", *(f"{kind}/{name}" for kind, name in WALKTHROUGH_OBJECTS), "--ignore-not-found", "-o", "name",
        check=False,
    ).stdout.split()
    if not present and not watch.nodes("default") and not watch.pods():
        return False
    say.say(f"{why}: {', '.join(present) or 'nodes of the default Provisioner'}")
    for kind, name in WALKTHROUGH_OBJECTS:
        cluster.kubectl("delete", kind, name, "--ignore-not-found", "--wait=false", check=False)
    watch.wait_for(lambda: not watch.pods() and not watch.nodes("default"), timeout,
                   f"inflate pods and nodes labelled {PROVISIONER_LABEL}=default to be gone", interval=1)
    return True


def replay(cluster: LocalCluster, say: Narrator, expiry_seconds: int | None,
           source: Traversable | None = None) -> bool:
    """The five steps of the walkthrough, on manifests from ``source`` (default: the embedded copy).

    Leftovers of an earlier run (the walkthrough's objects and nodes) are deleted first, so
    every step starts from the state the walkthrough assumes. Raises TimeoutError when a step
    stalls and ClusterError when kubectl fails.
    """
    def load_manifest(name: str) -> dict[str, Any]:
        return load_walkthrough_manifest(name, source)

    remove_walkthrough_objects(cluster, say, "removing leftovers of an earlier run")
    watch = Observer(cluster)
    watch.controller_log.skip()  # a reused cluster: narrate only what this replay causes
    kubectl = cluster.kubectl

    def show(*args: str) -> None:
        say.command("kubectl " + " ".join(args), kubectl(*args, check=False).stdout)

    def controller_lines() -> list[str]:
        return watch.controller_log.read()

    # 1 ----------------------------------------------------------------------------------
    say.step("1. Deploy the Provisioner (defaulted and validated by the admission webhook)")
    manifest = load_manifest("01-provisioner.yaml")
    say.command("kubectl apply -f 01-provisioner.yaml", watch.apply(manifest).stdout)
    show("get", "provisioners.karpenter.sh", "default", "-o", "yaml")
    invalid = copy.deepcopy(manifest)
    invalid["metadata"]["name"] = "invalid"
    invalid["spec"]["ttlSecondsAfterEmpty"] = -5
    rejected = watch.apply(invalid, check=False)
    say.command("kubectl apply -f invalid-provisioner.yaml   # ttlSecondsAfterEmpty: -5",
                (rejected.stdout + rejected.stderr))

    # 2 ----------------------------------------------------------------------------------
    say.step("2. Deploy inflate and scale it to 3: one right-sized node is launched just in time")
    watch.controller_log.skip()
    say.command("kubectl apply -f 02-inflate-deployment.yaml", watch.apply(load_manifest("02-inflate-deployment.yaml")).stdout)
    started = time.monotonic()
    say.command("kubectl scale deployment inflate --replicas 3", kubectl("scale", "deployment/inflate", "--replicas=3").stdout)
    watch.wait_for(lambda: len(watch.running(watch.pods())) == 3, 120, "3 inflate pods Running")
    say.say(f"3 pods Running {time.monotonic() - started:.1f}s after the scale-up")
    say.log(controller_lines())
    show("get", "node", "-L", "node.kubernetes.io/instance-type,kubernetes.io/arch,karpenter.sh/capacity-type")
    show("get", "pods", "-o", "wide", "-l", "app=inflate")
    first = watch.pods()[0]["metadata"]["name"]
    show("get", "events", "--field-selector", f"involvedObject.name={first}")

    # 3 ----------------------------------------------------------------------------------
    say.command("kubectl apply -f 03-pdb.yaml", watch.apply(load_manifest("03-pdb.yaml")).stdout)
    [old] = watch.nodes("default")
    old_name = old["metadata"]["name"]
    ttl = expiry_seconds or max(20, int(node_age_seconds(old)) + 10)
    say.step(f"3. Node upgrades: ttlSecondsUntilExpired (the walkthrough's 1800 s, shortened to {ttl} s) "
             "with a PodDisruptionBudget (minAvailable 2)")
    expiring = load_manifest("04-provisioner-with-expiry.yaml")
    expiring["spec"]["ttlSecondsUntilExpired"] = ttl
    say.command("kubectl apply -f 04-provisioner-with-expiry.yaml", watch.apply(expiring).stdout)
    say.say(f"node {old_name} expires {ttl} s after its creation; waiting")
    lowest = [3]
    reapplied = [False]

    def progress() -> None:
        lowest[0] = min(lowest[0], len(watch.running(watch.pods())))
        say.log(controller_lines(), limit=50)
        current = {n["metadata"]["name"]: n for n in watch.nodes("default")}
        if not reapplied[0] and (old_name not in current or current[old_name]["metadata"].get("deletionTimestamp")):
            # the replacement must not expire in turn during the next steps
            say.command("kubectl apply -f 01-provisioner.yaml   # the expiry off again", watch.apply(manifest).stdout)
            reapplied[0] = True

    watch.wait_for(lambda: old_name not in {n["metadata"]["name"] for n in watch.nodes("default")},
                   ttl + 240, "the expired node to be replaced and deleted", interval=0.5, on_poll=progress)
    if not reapplied[0]:
        watch.apply(manifest)
    watch.wait_for(lambda: len(watch.running(watch.pods())) == 3, 120, "3 inflate pods Running")
    time.sleep(1)  # let the controller finish logging the drain before the next step starts
    say.log(controller_lines(), limit=50)
    say.say(f"node {old_name} was replaced; at least {lowest[0]} inflate pods ran at every poll (PDB minAvailable 2)")
    show("get", "node", "-L", "node.kubernetes.io/instance-type,kubernetes.io/arch,karpenter.sh/capacity-type")
    show("get", "pods", "-o", "wide", "-l", "app=inflate")

    # 4 ----------------------------------------------------------------------------------
    say.step("4. Scale inflate to 0: the empty node goes after ttlSecondsAfterEmpty (30 s)")
    say.command("kubectl scale deployment inflate --replicas 0", kubectl("scale", "deployment/inflate", "--replicas=0").stdout)
    emptied = time.monotonic()
    watch.wait_for(lambda: not watch.nodes("default"), 150, "the empty node to be deleted", interval=1,
                   on_poll=lambda: say.log(controller_lines(), limit=50))
    say.say(f"the empty node was terminated and deleted {time.monotonic() - emptied:.0f}s after the scale-down")
    show("get", "node", "-L", "node.kubernetes.io/instance-type,kubernetes.io/arch,karpenter.sh/capacity-type")

    # 5 ----------------------------------------------------------------------------------
    say.step("5. Delete the Provisioner: nothing it launched is left behind")
    kubectl("delete", "pdb", "inflate-pdb", check=False)
    say.command("kubectl scale deployment inflate --replicas 1   # so that a node exists when it is deleted",
                kubectl("scale", "deployment/inflate", "--replicas=1").stdout)
    watch.wait_for(lambda: len(watch.running(watch.pods())) == 1, 120, "1 inflate pod Running")
    show("get", "node", "-L", "node.kubernetes.io/instance-type,kubernetes.io/arch,karpenter.sh/capacity-type")
    say.command("kubectl delete provisioner default", kubectl("delete", "provisioners.karpenter.sh", "default").stdout)
    watch.wait_for(lambda: not watch.nodes() and not watch.live_instances(), 120, "no node and no running instance",
                   interval=1, on_poll=lambda: say.log(controller_lines(), limit=50))
    kubectl("delete", "deployment", "inflate", check=False)
    show("get", "node", "-L", "node.kubernetes.io/instance-type,kubernetes.io/arch,karpenter.sh/capacity-type")
    states = sorted({v["state"] for v in watch.instances().values()})
    say.say(f"EC2 instances launched during the demo: {len(watch.instances())}, states now: {', '.join(states) or 'none'}")
    say.command(f"kubectl get events --sort-by={EVENTS_SORT_KEY}", watch.events_table())
    say.say("walkthrough complete")
    return True
