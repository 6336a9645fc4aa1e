"""A workload's plan, computed as ``groupless plan`` computes it (no cluster needed).

The objects (those read back from the cluster, such as Nodes and the pods bound to them, and
the workload's pods not created yet) are written to a manifest file and read by
:func:`provisioner.plan.read_inputs` (admission's defaults: Provisioner defaults and
validation, LimitRange defaults for pods not yet created); the instance types are the kwok
catalog's (:mod:`provisioner.cloudprovider.kwok`'s default files, converted by
:func:`provisioner.plan.read_catalog` with the command's own options and defaults); the
solver input comes from the production builder (:func:`provisioner.plan.build_input` over
:func:`provisioner.state.solverinput.build_solver_input`) and the plan from
:func:`provisioner.scheduling.solver.solve`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from provisioner import plan as dry_run
from provisioner.api.types import Provisioner
from provisioner.cli import build_parser
from provisioner.cloudprovider.kwok import DEFAULT_INSTANCE_TYPES, DEFAULT_OFFERINGS, DEFAULT_PRICES
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.pods import Pod
from provisioner.scheduling.solver import Plan, solve


@dataclass(frozen=True)
class Planned:
    """A plan and what it was computed from: the Provisioners (defaulted), their instance types, the pods.

    ``pods``: the pods the solver was given, as it read them (LimitRange defaults applied, so
    with the requests admission will give them).
    """

    plan: Plan
    provisioners: Mapping[str, Provisioner]
    instance_types: Mapping[str, Sequence[InstanceType]]
    pods: tuple[Pod, ...] = ()
    warnings: tuple[str, ...] = ()


def plan_objects(objects: Iterable[Mapping[str, Any]]) -> Planned:
    """The plan for ``objects`` (wire objects of any kind ``groupless plan`` reads).

    Raises :class:`provisioner.plan.PlanInputError` for input ``groupless plan`` refuses.
    """
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="groupless-differential-") as directory:
        path = Path(directory) / "workload.yaml"
        path.write_text(yaml.safe_dump_all([dict(o) for o in objects], sort_keys=False))
        inputs = dry_run.read_inputs([str(path)])
        warnings.extend(inputs.warnings)
        # the options of `groupless plan -f <file> --instance-types ... --offerings ... --pricing-file ...`,
        # every other one at the command's own default
        args = build_parser().parse_args([
            "plan", "-f", str(path), "--instance-types", str(DEFAULT_INSTANCE_TYPES),
            "--offerings", str(DEFAULT_OFFERINGS), "--pricing-file", str(DEFAULT_PRICES)])
    catalog = dry_run.read_catalog(args, inputs.provisioners, warnings)
    given = dry_run.build_input(inputs, catalog.instance_types)
    return Planned(plan=solve(given), provisioners={p.name: p for p in inputs.provisioners},
                   instance_types=catalog.instance_types, pods=tuple(given.pods), warnings=tuple(warnings))


__all__ = ["Planned", "plan_objects"]
