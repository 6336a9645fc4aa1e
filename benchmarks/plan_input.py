"""Input files for timing ``groupless plan`` end to end on Karpenter's scheduling benchmark.

    .venv/bin/python -m benchmarks.plan_input DIR [--pods 5000]
    .venv/bin/groupless plan -f DIR/workload.yaml --instance-types DIR/instance-types.json \\
        --offerings DIR/offerings.json --pricing-file DIR/prices.json -o json > /dev/null
    .venv/bin/python -m benchmarks.plan_input DIR --split   # seconds per stage of that command

``--split`` runs the stages of ``groupless plan`` (:func:`provisioner.plan.run`) on the files
already in DIR, each timed in wall and CPU seconds: load (read the manifests: YAML parsing, then Provisioner defaulting
and validation, workload expansion), catalog (files to instance types), solver input (pods,
DaemonSets and nodes parsed into the solver's types), solve, render (the JSON output); and,
apart, the YAML parse alone with the loader in use.

Writes into DIR:

- ``workload.yaml``: a Provisioner without requirements or limits (the walkthrough's ``provider``
  block, which validation requires), then the pods of
  :func:`benchmarks.scheduling.diverse_pods` (seed 42: five groups -- plain, zone spread,
  hostname spread, zone self-affinity, hostname anti-affinity) as ``v1`` Pod documents;
- ``instance-types.json``: the benchmark's 400 ``fake-it-i`` types in the DescribeInstanceTypes
  shape (i+1 vCPU, 2(i+1) GiB of ``SizeInMiB``, amd64, spot and on-demand, one ENI with
  10(i+1)-1 addresses so the ENI-limited pod count is 10(i+1)); ``groupless plan`` applies the
  EC2 resource model to them (92.5% of the memory, kubelet reservations), so capacities are
  close to, not equal to, the in-memory benchmark's;
- ``offerings.json``: every type in ap-south-1a, -b and -c;
- ``prices.json``: the benchmark's price, 0.1 USD per vCPU + 0.1 per GB, for both capacity types.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.scheduling import diverse_pods

REGION = "ap-south-1"
ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")
TYPES = 400


def instance_types(count: int = TYPES) -> list[dict[str, Any]]:
    return [
        {
            "InstanceType": f"fake-it-{i}",
            "VCpuInfo": {"DefaultVCpus": i + 1},
            "MemoryInfo": {"SizeInMiB": 2 * (i + 1) * 1024},
            "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
            "NetworkInfo": {"MaximumNetworkInterfaces": 1, "Ipv4AddressesPerInterface": 10 * (i + 1) - 1},
            "SupportedUsageClasses": ["on-demand", "spot"],
            "SupportedVirtualizationTypes": ["hvm"],
            "BareMetal": False,
            "Hypervisor": "nitro",
        }
        for i in range(count)
    ]


def prices(count: int = TYPES) -> dict[str, Any]:
    table = {f"fake-it-{i}": round(0.1 * (i + 1) + 0.1 * 2 * (i + 1) * 2**30 / 1e9, 6) for i in range(count)}
    return {REGION: {"on-demand": table, "spot": dict(table)}}


def workload(pods: int) -> list[dict[str, Any]]:
    selector = {"kubernetes.io/cluster/karpenter-demo": "*"}
    provisioner = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "default"},
                   "spec": {"provider": {"subnetSelector": selector, "securityGroupSelector": selector}}}
    return [provisioner, *({"apiVersion": "v1", "kind": "Pod", **pod}
                           for pod in diverse_pods(pods, random.Random(42)))]


class _Stages:
    """Wall and CPU seconds (``time.perf_counter``, ``time.process_time``) of named stages."""

    def __init__(self) -> None:
        self.seconds: dict[str, tuple[float, float]] = {}
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def done(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.seconds[name] = (wall - self._wall, cpu - self._cpu)
        self._wall, self._cpu = wall, cpu


def split(directory: Path) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds of each stage of ``groupless plan -o json`` on the files in ``directory``.

    CPU time is this process's (``time.process_time``): on the shared machine the wall time of
    a stage also holds the time other processes had the cores.
    """
    from provisioner import plan
    from provisioner.scheduling.solver import solve

    args = argparse.Namespace(
        file=[str(directory / "workload.yaml")], instance_types=str(directory / "instance-types.json"),
        offerings=str(directory / "offerings.json"), pricing_file=str(directory / "prices.json"),
        region=None, aws_endpoint_url=None, eni_limited_pod_density=True, output="json")
    stages = _Stages()
    text = (directory / "workload.yaml").read_text()
    documents = sum(1 for _ in _yaml_documents(plan, text))
    stages.done("yaml parse only")
    inputs = plan.read_inputs(args.file)
    stages.done("load")
    catalog = plan.read_catalog(args, inputs.provisioners, [])
    stages.done("catalog")
    given = plan.build_input(inputs, catalog.instance_types)
    stages.done("solver input")
    result = solve(given)
    stages.done("solve")
    rendered = json.dumps(plan.plan_to_json(result, catalog), indent=2)
    stages.done("render")
    assert documents == len(inputs.pods) + len(inputs.provisioners) and rendered
    return stages.seconds


def _yaml_documents(plan: Any, text: str) -> Any:
    """The documents of ``text`` read the way this ``plan`` module reads them (yamlload, or PyYAML's pure loader)."""
    yamlload = getattr(plan, "yamlload", None)
    return yamlload.load_all(text) if yamlload is not None else yaml.safe_load_all(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--split", action="store_true", help="time the stages of groupless plan on DIR's files")
    args = parser.parse_args(argv)
    out: Path = args.directory
    if args.split:
        times = split(out)
        wall = sum(w for k, (w, _) in times.items() if k != "yaml parse only")
        cpu = sum(c for k, (_, c) in times.items() if k != "yaml parse only")
        print("  ".join(f"{k} {w:.2f}/{c:.2f}s" for k, (w, c) in times.items())
              + f"  total {wall:.2f}/{cpu:.2f}s (wall/CPU)")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    (out / "workload.yaml").write_text(yaml.safe_dump_all(workload(args.pods), sort_keys=False))
    (out / "instance-types.json").write_text(json.dumps({"InstanceTypes": instance_types()}))
    offerings = [{"InstanceType": t["InstanceType"], "Location": z, "LocationType": "availability-zone"}
                 for t in instance_types() for z in ZONES]
    (out / "offerings.json").write_text(json.dumps({"InstanceTypeOfferings": offerings}))
    (out / "prices.json").write_text(json.dumps(prices()))
    print(f"wrote {out}/workload.yaml ({args.pods} pods), instance-types.json, offerings.json, prices.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
