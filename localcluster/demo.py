"""``groupless demo``: the walkthrough, replayed on a local control plane, narrated.

Why a narrated replay rather than a script of kubectl commands: a user's first question is
"what does it do?", and the answer is what they would see on a real cluster -- the node table
with instance type, architecture and capacity type filled in, pods moving onto the node
launched for them, the controller's batch / packing / launch log lines, the events, and nodes
retired when empty or expired without breaking the PodDisruptionBudget. Each step prints the
command a user would type (``$ kubectl ...``) and its output.
"""

from __future__ import annotations

import copy
import sys
import time
from typing import Any

from localcluster.build import BuildError
from localcluster.cluster import ClusterError, LocalCluster, Settings, available_subcommands
from localcluster.walkthrough import Observer, load_manifest, node_age_seconds, walkthrough_dir

REQUIRED = ("webhook", "extender", "controller")


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


def run_demo(name: str = "demo", keep: bool = False, expiry_seconds: int | None = None) -> int:
    """Bring the cluster ``name`` up (or reuse it), replay the walkthrough, tear down unless ``keep``.

    Returns the process exit code: 0 when every step reached its expected state, 1 otherwise.
    """
    say = Narrator()
    missing = [c for c in REQUIRED if c not in available_subcommands()]
    if missing:
        print(f"error: this installation lacks `groupless {' / '.join(missing)}`; the demo needs all three",
              file=sys.stderr)
        return 1
    cluster = LocalCluster(name, Settings())
    reused = cluster.running()
    try:
        if reused:
            cluster.attach()
            say.say(f"reusing the running local cluster {name!r}")
        else:
            say.step("Starting a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok, moto, Groupless)")
            cluster.up(detach=keep, progress=say.say)
        say.say(f"walkthrough manifests from {walkthrough_dir()}")
        say.say(f'to follow along in another shell: eval "$(groupless dev-cluster env --name {name})"')
        ok = replay(cluster, say, expiry_seconds)
    except (BuildError, ClusterError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        ok = False
    except (TimeoutError, RuntimeError) as error:
        print(f"\nerror: the demo did not reach the expected state: {error}", file=sys.stderr)
        print(f"logs: {cluster.logs}", file=sys.stderr)
        ok = False
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        ok = False
    finally:
        if keep:
            print(f"\nThe cluster keeps running: eval \"$(groupless dev-cluster env --name {name})\"; "
                  f"stop it with `groupless dev-cluster down --name {name}`.")
        elif not reused:
            from localcluster.cli import shielded_down

            shielded_down(cluster)
            print("\nThe local cluster is stopped.")
    return 0 if ok else 1


def replay(cluster: LocalCluster, say: Narrator, expiry_seconds: int | None) -> bool:
    """The five steps of the walkthrough. Raises TimeoutError when a step stalls."""
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
    say.command("kubectl get events --sort-by=.lastTimestamp", watch.events_table())
    say.say("walkthrough complete")
    return True
