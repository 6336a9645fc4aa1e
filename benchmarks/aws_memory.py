"""Where an idle controller's memory goes with the AWS cloud provider on moto, against the kwok provider.

    .venv/bin/python -m benchmarks.aws_memory [--endpoint-url URL] [--top N] [--provider aws|kwok|both]

Without ``--endpoint-url`` it starts a seeded moto server of its own (``python -m
localcluster.aws``, as the local cluster does) and stops it at the end. For each provider it
runs two child processes that load what the controller loads (its modules, then the provider
as ``groupless controller`` builds it: boto3 clients for EC2 and SSM from one session against
moto, or the kwok provider over its shipped catalog) and take it to the state of a controller
after its first instance-type refresh: the walkthrough Provisioner's instance types listed,
prices refreshed, listed again. The first child prints the process's RSS (``VmRSS`` of
``/proc/self/status``, MiB) after each phase, with nothing traced; the second the same under
``tracemalloc`` (RSS then includes tracemalloc's own books) and the ``--top`` largest
allocations still alive at the end, grouped by traceback (six frames deep; the four innermost
printed, innermost first).

The figures are one process's, not the running controller's (no informers, no API server):
the scale benchmark (``benchmarks/scale_out.py``) gives those. Note ``cat /proc/loadavg``
beside them as for every benchmark here (it is printed).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
REGION = "ap-south-1"
CLUSTER = "karpenter-demo"
SELECTOR = ((f"kubernetes.io/cluster/{CLUSTER}", "*"),)


def rss_mib() -> float:
    """This process's resident set (``VmRSS``), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def phase(name: str, phases: list[tuple[str, float]]) -> None:
    gc.collect()
    phases.append((name, rss_mib()))


def measure(provider_name: str, endpoint_url: str | None, top: int) -> dict[str, Any]:
    """The child: load the controller's modules and a provider, list instance types; RSS per phase."""
    phases: list[tuple[str, float]] = []
    phase("interpreter", phases)
    importlib.import_module("kubernetes.client")  # the controller's API client
    importlib.import_module("provisioner.app.controller")
    from provisioner.api.types import AWSProvider, Provisioner, ProvisionerSpec

    phase("controller modules", phases)
    walkthrough = Provisioner(
        name="default",
        spec=ProvisionerSpec(provider=AWSProvider(subnet_selector=SELECTOR, security_group_selector=SELECTOR)),
    )
    refresh = None
    if provider_name == "aws":
        from provisioner.cloudprovider.aws.provider import AWSCloudProvider
        from provisioner.cloudprovider.aws.settings import AWSSettings

        settings = AWSSettings(cluster_name=CLUSTER, cluster_endpoint="https://127.0.0.1:6443", region=REGION,
                               endpoint_url=endpoint_url, kubernetes_version="v1.36.3")
        provider: Any = AWSCloudProvider.from_settings(settings)
        refresh = provider.pricing.refresh
    else:
        from provisioner.cloudprovider.kwok import KwokCloudProvider
        from provisioner.kube.fake import FakeKubeAPI

        provider = KwokCloudProvider(FakeKubeAPI())
    phase("provider built", phases)
    count = len(provider.get_instance_types(walkthrough))
    phase("instance types listed", phases)
    if refresh is not None:
        refresh()
        provider.get_instance_types(walkthrough)
        phase("prices refreshed, listed again", phases)
    result: dict[str, Any] = {"provider": provider_name, "instance_types": count, "phases": phases}
    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*")]
        )
        result["traced_mib"] = tracemalloc.get_traced_memory()[0] / MIB
        result["top"] = [
            {"size_mib": s.size / MIB, "count": s.count,
             "frames": [f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in reversed(s.traceback[-4:])]}
            for s in snapshot.statistics("traceback")[:top]
        ]
    return result


def start_moto() -> tuple[subprocess.Popen[str], str]:
    """A seeded moto server (``python -m localcluster.aws``) and its endpoint URL."""
    from localcluster.ports import free_port

    port = free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    process = subprocess.Popen([sys.executable, "-m", "localcluster.aws", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert process.stdout is not None
    account = json.loads(process.stdout.readline())  # the seeded account, one JSON line
    return process, str(account["endpoint_url"])


def child(provider_name: str, endpoint_url: str | None, top: int, traced: bool) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", provider_name, "--top", str(top)]
    if endpoint_url:
        command += ["--endpoint-url", endpoint_url]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": REGION}
    if traced:
        env["PYTHONTRACEMALLOC"] = "6"
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def report(plain: dict[str, Any], traced: dict[str, Any]) -> None:
    print(f"== {plain['provider']}: {plain['instance_types']} instance types for the walkthrough Provisioner")
    before = 0.0
    for (name, rss), (_, traced_rss) in zip(plain["phases"], traced["phases"], strict=True):
        print(f"  {name:34s} RSS {rss:6.1f} MiB ({rss - before:+6.1f})   under tracemalloc {traced_rss:6.1f}")
        before = rss
    print(f"  traced at the end: {traced['traced_mib']:.1f} MiB; largest by traceback:")
    for entry in traced["top"]:
        print(f"  {entry['size_mib']:6.2f} MiB {entry['count']:7d} blocks  {' <- '.join(entry['frames'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint-url", help="a seeded moto server's URL (default: start one)")
    parser.add_argument("--provider", choices=("aws", "kwok", "both"), default="both")
    parser.add_argument("--top", type=int, default=15, help="tracemalloc entries to print (default 15)")
    parser.add_argument("--child", choices=("aws", "kwok"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.endpoint_url, args.top)))
        return 0
    print("load average at start:", Path("/proc/loadavg").read_text().strip())
    moto = None
    endpoint_url = args.endpoint_url
    providers = ("aws", "kwok") if args.provider == "both" else (args.provider,)
    try:
        if "aws" in providers and not endpoint_url:
            started = time.monotonic()
            moto, endpoint_url = start_moto()
            print(f"moto serving at {endpoint_url} ({time.monotonic() - started:.1f} s)")
        for name in providers:
            report(child(name, endpoint_url, args.top, False), child(name, endpoint_url, args.top, True))
    finally:
        if moto is not None:
            moto.terminate()
            moto.wait(timeout=30)
    print("load average at end:", Path("/proc/loadavg").read_text().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
