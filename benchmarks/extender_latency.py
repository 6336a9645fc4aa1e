"""Extender latency through the real HTTPS server on loopback: 1 pod against 5,000 nodes.

    .venv/bin/python -m benchmarks.extender_latency [--nodes 5000] [--requests 400] [--seconds 20]

Starts ``groupless``'s extender app under gunicorn (gthread, one process, 8 threads, TLS with a
throw-away CA from ``certs.bundle``) on a free 127.0.0.1 port, over a synthetic cluster of
``--nodes`` managed r6gd.xlarge nodes (2% carrying nominations, 1% being disrupted, bound pods
on every node), and times complete requests (send, server work, read the answer) from
keep-alive clients (``http.client`` over one TLS connection per client thread):

- ``filter`` with ``nodeCacheCapable: true`` (``NodeNames``) and ``false`` (full ``Nodes``),
- ``prioritize`` with ``NodeNames``,

each at concurrency 1 and 8, printing p50/p99 per case. Target: p50 < 2 ms and
p99 < 10 ms for filter with ``nodeCacheCapable: true``. Loops are bounded by ``--requests`` per
case and ``--seconds`` per case; traffic goes to loopback only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import ssl
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

from extender.state import ExtenderState, ProvisionerInfo, build_state
from provisioner.clock import rfc3339
from provisioner.model import nominations as nom
from provisioner.model.requirements import Requirements
from provisioner.model.resources import Resources

NOW = 1_767_225_600.0


def _node(index: int, *, nominated: bool, disrupted: bool) -> dict[str, Any]:
    name = f"ip-10-{index // 250 % 256}-{index % 250}-{index // 64000}.ap-south-1.compute.internal"
    annotations = {"groupless.dev/price-per-hour": "0.2304" if index % 3 else "0.0691"}
    if nominated:
        nominations = nom.Nominations(NOW + 300, {
            f"nominated-{index}-{k}": nom.NominatedPod(f"default/inflate-{index}-{k}", Resources({"cpu": 1000}))
            for k in range(3)
        })
        annotations["groupless.dev/nominations"] = nom.encode(nominations)
    taints = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}] if disrupted else []
    images = [{"names": [f"602401143452.dkr.ecr.ap-south-1.amazonaws.com/image-{i}@sha256:{i:064x}",
                         f"602401143452.dkr.ecr.ap-south-1.amazonaws.com/image-{i}:v1.{i}.0"],
               "sizeBytes": 10_000_000 + i} for i in range(8)]
    return {
        "metadata": {
            "name": name, "uid": f"00000000-0000-0000-0000-{index:012d}", "resourceVersion": str(1000 + index),
            "creationTimestamp": rfc3339(NOW - 3600 - index),
            "labels": {"karpenter.sh/provisioner-name": "default", "karpenter.sh/capacity-type": "on-demand",
                       "kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
                       "node.kubernetes.io/instance-type": "r6gd.xlarge",
                       "topology.kubernetes.io/zone": f"ap-south-1{'abc'[index % 3]}",
                       "topology.kubernetes.io/region": "ap-south-1"},
            "annotations": annotations,
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {"providerID": f"aws:///ap-south-1a/i-{index:017x}", "taints": taints},
        "status": {
            "capacity": {"cpu": "4", "memory": "32247848Ki", "pods": "58", "ephemeral-storage": "20959212Ki"},
            "allocatable": {"cpu": "3920m", "memory": "31408168Ki", "pods": "58", "ephemeral-storage": "18242267924"},
            "conditions": [{"type": t, "status": "False" if t != "Ready" else "True",
                            "lastHeartbeatTime": rfc3339(NOW - 10), "lastTransitionTime": rfc3339(NOW - 3000),
                            "reason": "Kubelet" + t, "message": f"kubelet reports {t}"}
                           for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
            "addresses": [{"type": "InternalIP", "address": f"10.{index // 250 % 256}.{index % 250}.1"},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.36.3", "osImage": "Amazon Linux 2", "architecture": "arm64",
                         "containerRuntimeVersion": "containerd://1.7.11", "operatingSystem": "linux"},
            "images": images,
        },
    }


def _bound_pod(index: int, node: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": f"app-{index}", "namespace": "default", "uid": f"bound-{index}"},
            "spec": {"nodeName": node, "containers": [{"name": "app", "resources": {"requests": {
                "cpu": cpu, "memory": "512Mi"}}}]},
            "status": {"phase": "Running"}}


def synthetic_cluster(count: int, seed: int = 7) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``count`` managed nodes and the pods bound to them (deterministic for a seed)."""
    rng = random.Random(seed)
    nodes = [_node(i, nominated=i % 50 == 0, disrupted=i % 100 == 1) for i in range(count)]
    pods = []
    for i, node in enumerate(nodes):
        for k in range(rng.randrange(0, 4)):
            pods.append(_bound_pod(i * 4 + k, node["metadata"]["name"], rng.choice(["250m", "500m", "1"])))
    for i in range(0, count, 50):  # the nominated pods are still pending
        for k in range(3):
            pods.append({"metadata": {"name": f"inflate-{i}-{k}", "namespace": "default",
                                      "uid": f"nominated-{i}-{k}"},
                         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                         "status": {"phase": "Pending"}})
    return nodes, pods


def synthetic_state(count: int) -> tuple[ExtenderState, float]:
    """The :class:`ExtenderState` of :func:`synthetic_cluster` and the time it is meant for."""
    nodes, pods = synthetic_cluster(count)
    default = ProvisionerInfo("default", Requirements.from_labels({"karpenter.sh/provisioner-name": "default"}),
                              ttl_seconds_until_expired=30 * 86400)
    return build_state(nodes, pods, [default]), NOW


def the_pod() -> dict[str, Any]:
    """A pending pod as kube-scheduler sends it (the walkthrough's inflate replica)."""
    from tests.fixtures.extender import body

    return cast(dict[str, Any], body("filter-nodenames")["Pod"])


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its children processes (gunicorn's worker), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_case(port: int, ca_file: str, verb: str, payload: bytes, concurrency: int, requests: int,
             seconds: float, server_pid: int) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=ca_file)
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    per_thread = max(1, requests // concurrency)
    errors: list[str] = []

    def client() -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=60)
        try:
            # warm-up: TLS handshake and first request outside the timings
            conn.request("POST", f"/{verb}", body=payload, headers={"Content-Type": "application/json"})
            conn.getresponse().read()
            mine = []
            for _ in range(per_thread):
                if time.monotonic() > deadline:
                    break
                started = time.perf_counter()
                conn.request("POST", f"/{verb}", body=payload, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                mine.append(time.perf_counter() - started)
                if response.status != 200:
                    errors.append(f"{response.status} {data[:200]!r}")
                    break
            with lock:
                latencies.extend(mine)
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    cpu = process_cpu_seconds(server_pid)
    wall = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall
    cpu = process_cpu_seconds(server_pid) - cpu
    if errors:
        raise RuntimeError(f"{verb}: {errors[0]}")
    return {
        "count": len(latencies),
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "max_ms": 1000 * max(latencies),
        "rps": len(latencies) / wall,
        # server CPU per request (warm-up requests included): what latency costs without contention
        "cpu_ms": 1000 * cpu / (len(latencies) + concurrency),
    }


def print_in_process(count: int) -> None:
    """CPU time of decode + handler + encode alone (no HTTP, TLS, gunicorn or flask), best of 5."""
    import timeit

    import orjson

    from extender import handlers

    state, now = synthetic_state(count)
    nodes, _ = synthetic_cluster(count)
    body = orjson.dumps({"Pod": the_pod(), "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]})
    cases = {
        "filter": lambda: orjson.dumps(handlers.filter(orjson.loads(body), state, now)),
        "prioritize": lambda: orjson.dumps(handlers.prioritize(orjson.loads(body), state, now)),
    }
    for verb, call in cases.items():
        best = min(timeit.Timer(call, timer=time.process_time).repeat(number=20, repeat=5)) / 20
        print(f"in-process {verb} (decode + handler + encode, nodeCacheCapable=true): {1000 * best:.2f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=400, help="timed requests per case (NodeNames mode)")
    parser.add_argument("--full-requests", type=int, default=24, help="timed requests per case (full Nodes mode)")
    parser.add_argument("--seconds", type=float, default=20.0, help="time bound per case")
    args = parser.parse_args()

    from tests.component.extender.serve_fixture import running, write_certs

    print_in_process(args.nodes)

    nodes, _ = synthetic_cluster(args.nodes)
    names = [n["metadata"]["name"] for n in nodes]
    pod = the_pod()
    by_names = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()
    full = json.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}).encode()
    print(f"extender latency: 1 pod against {args.nodes} nodes over HTTPS on loopback "
          f"(gunicorn gthread, 1 process, 8 threads); bodies: NodeNames {len(by_names) / 1024:.0f} KiB, "
          f"Nodes {len(full) / 1024 / 1024:.1f} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = write_certs(Path(tmp))
        with running(cert_dir, "--state", f"synthetic:{args.nodes}", timeout=120) as server:
            port = int(server.url.rsplit(":", 1)[1])
            cases = [
                ("filter", "nodeCacheCapable=true ", by_names, args.requests),
                ("prioritize", "nodeCacheCapable=true ", by_names, args.requests),
                ("filter", "nodeCacheCapable=false", full, args.full_requests),
            ]
            print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
            print(f"{'verb':<11}{'mode':<24}{'conc':>5}{'n':>6}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'req/s':>8}"
                  f"{'srv cpu ms/req':>16}")
            for verb, mode, payload, count in cases:
                for concurrency in (1, 8):
                    r = run_case(port, server.ca_file, verb, payload, concurrency, count, args.seconds,
                                 server.process.pid)
                    print(f"{verb:<11}{mode:<24}{concurrency:>5}{r['count']:>6}{r['p50_ms']:>9.2f}"
                          f"{r['p99_ms']:>9.2f}{r['max_ms']:>9.2f}{r['rps']:>8.1f}{r['cpu_ms']:>16.2f}", flush=True)
            print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
