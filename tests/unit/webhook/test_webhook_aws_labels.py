"""karpenter.k8s.aws/* instance-type labels: well-known for requirements (as Karpenter v0.10+), refused as labels."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.model.labels import AWS_INSTANCE_LABELS
from tests.builders.admission import review, valid

UID = "705ab4f5-6393-11e8-b7cc-42010a800002"


@pytest.mark.parametrize("key", sorted(AWS_INSTANCE_LABELS))
def test_requirement_on_an_aws_instance_label_is_allowed(post: Any, key: str) -> None:
    obj = valid()
    operator = "Gt" if key.endswith(("-cpu", "-memory", "-generation", "-count", "-nvme")) else "In"
    values = ["2"] if operator == "Gt" else ["x"]
    obj["spec"]["requirements"].append({"key": key, "operator": operator, "values": values})
    assert post("/validate", review(obj))["response"] == {"uid": UID, "allowed": True}


def test_walkthrough_style_family_and_gpu_requirements_are_allowed(post: Any) -> None:
    obj = valid()
    obj["spec"]["requirements"] += [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "p4d"]},
        {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["a10g"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["33"]},
    ]
    assert post("/validate", review(obj))["response"] == {"uid": UID, "allowed": True}


def test_aws_instance_label_as_a_provisioner_label_is_refused(post: Any) -> None:
    obj = valid()
    obj["spec"]["labels"] = {"karpenter.k8s.aws/instance-family": "m5"}
    response = post("/validate", review(obj))["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        'spec.labels: invalid value "karpenter.k8s.aws/instance-family": label karpenter.k8s.aws/instance-family '
        "is restricted: the cloud provider sets it from the instance type; constrain it with a requirement instead")


def test_other_keys_of_the_aws_domain_stay_reserved_for_requirements(post: Any) -> None:
    obj = valid()
    obj["spec"]["requirements"].append({"key": "karpenter.k8s.aws/instance-colour", "operator": "Exists"})
    response = post("/validate", review(obj))["response"]
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        'spec.requirements[2].key: invalid value "karpenter.k8s.aws/instance-colour": label domain not allowed')
