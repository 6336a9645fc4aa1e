"""LimitRange defaults as the API server's pod defaulting and the LimitRanger admission plugin apply them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from provisioner.model.resources import MIB
from provisioner.scheduling.daemonsets import daemonset_pod
from provisioner.scheduling.limitranges import (
    LimitRangeError,
    apply_limit_range_defaults,
    container_defaults,
    namespace_limit_ranges,
)
from provisioner.scheduling.pods import pod_requests


def limit_range(name: str, *items: dict[str, Any], namespace: str = "team") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": namespace},
            "spec": {"limits": list(items)}}


#: The Kubernetes documentation's example: defaults of 500m/512Mi limits, 250m/256Mi requests.
DEFAULTS = limit_range("defaults", {"type": "Container", "default": {"cpu": "500m", "memory": "512Mi"},
                                    "defaultRequest": {"cpu": "250m", "memory": "256Mi"}})


def container(name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
              **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "pause", **({"resources": resources} if resources else {}), **extra}


def pod(*containers: dict[str, Any], namespace: str | None = "team", init: tuple[dict[str, Any], ...] = ()
        ) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "web-0"}
    if namespace is not None:
        metadata["namespace"] = namespace
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def resources_of(obj: dict[str, Any], part: str = "containers") -> list[dict[str, Any]]:
    return [c.get("resources", {}) for c in obj["spec"][part]]


def test_a_container_with_nothing_gets_the_default_request_and_limit() -> None:
    admitted = apply_limit_range_defaults(pod(container("app")), [DEFAULTS])
    assert resources_of(admitted) == [{"requests": {"cpu": "250m", "memory": "256Mi"},
                                       "limits": {"cpu": "500m", "memory": "512Mi"}}]
    assert pod_requests(admitted) == {"cpu": 250, "memory": 256 * MIB, "pods": 1}


def test_a_container_with_only_a_limit_requests_its_limit_not_the_default_request() -> None:
    # the API server's pod defaulting runs before admission: the cpu request is the cpu limit
    admitted = apply_limit_range_defaults(pod(container("app", limits={"cpu": "2"})), [DEFAULTS])
    assert resources_of(admitted) == [{"requests": {"cpu": "2", "memory": "256Mi"},
                                       "limits": {"cpu": "2", "memory": "512Mi"}}]
    assert pod_requests(admitted) == {"cpu": 2000, "memory": 256 * MIB, "pods": 1}


def test_a_container_with_a_request_keeps_it_and_gets_the_default_limit() -> None:
    admitted = apply_limit_range_defaults(pod(container("app", requests={"cpu": "100m"})), [DEFAULTS])
    assert resources_of(admitted) == [{"requests": {"cpu": "100m", "memory": "256Mi"},
                                       "limits": {"cpu": "500m", "memory": "512Mi"}}]
    assert pod_requests(admitted) == {"cpu": 100, "memory": 256 * MIB, "pods": 1}


def test_init_containers_get_the_defaults_too() -> None:
    obj = pod(container("app", requests={"cpu": "100m", "memory": "64Mi"}),
              init=(container("migrate"), container("sidecar", requests={"cpu": "50m"}, restartPolicy="Always")))
    admitted = apply_limit_range_defaults(obj, [DEFAULTS])
    assert resources_of(admitted, "initContainers") == [
        {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
        {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
    ]
    # running: app + sidecar = 150m, 320Mi; while "migrate" runs (before the sidecar starts): 250m, 256Mi
    assert pod_requests(admitted) == {"cpu": 250, "memory": 320 * MIB, "pods": 1}


def test_several_limit_ranges_apply_by_name_each_filling_only_what_is_still_unset() -> None:
    memory_only = limit_range("a-memory", {"type": "Container", "defaultRequest": {"memory": "1Gi"}})
    both = limit_range("b-both", {"type": "Container", "defaultRequest": {"cpu": "300m", "memory": "2Gi"},
                                  "default": {"cpu": "1"}})
    for given in ([memory_only, both], [both, memory_only]):  # the order given does not matter: by name
        admitted = apply_limit_range_defaults(pod(container("app")), given)
        assert resources_of(admitted) == [{"requests": {"memory": "1Gi", "cpu": "300m"}, "limits": {"cpu": "1"}}]
    assert [lr["metadata"]["name"] for lr in namespace_limit_ranges([both, memory_only], "team")] == [
        "a-memory", "b-both"]


def test_within_one_limit_range_a_later_container_item_wins() -> None:
    lr = limit_range("two-items", {"type": "Container", "defaultRequest": {"cpu": "100m"}},
                     {"type": "Container", "defaultRequest": {"cpu": "200m", "memory": "128Mi"}})
    assert container_defaults(lr).requests == {"cpu": "200m", "memory": "128Mi"}


def test_other_namespaces_are_untouched_and_an_unset_namespace_is_default() -> None:
    other = limit_range("defaults", {"type": "Container", "defaultRequest": {"cpu": "1"}}, namespace="other")
    obj = pod(container("app"))
    assert apply_limit_range_defaults(obj, [other]) is obj
    in_default = limit_range("defaults", {"type": "Container", "defaultRequest": {"cpu": "1"}}, namespace="default")
    unset = pod(container("app"), namespace=None)
    assert resources_of(apply_limit_range_defaults(unset, [other, in_default])) == [{"requests": {"cpu": "1"}}]


def test_pod_and_claim_items_give_no_defaults() -> None:
    lr = limit_range("pod-limits", {"type": "Pod", "max": {"cpu": "4"}, "min": {"cpu": "100m"}},
                     {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}})
    assert container_defaults(lr).requests == {} and container_defaults(lr).limits == {}
    admitted = apply_limit_range_defaults(pod(container("app")), [lr])
    assert resources_of(admitted) == [{}]
    assert pod_requests(admitted) == {"pods": 1}


@pytest.mark.parametrize(("item", "requests", "limits"), [
    # SetDefaults_LimitRangeItem: default <- max; defaultRequest <- default, then <- min
    ({"default": {"cpu": "1"}}, {"cpu": "1"}, {"cpu": "1"}),
    ({"max": {"cpu": "2"}}, {"cpu": "2"}, {"cpu": "2"}),
    ({"min": {"cpu": "100m"}}, {"cpu": "100m"}, {}),
    ({"min": {"cpu": "100m"}, "max": {"cpu": "2"}}, {"cpu": "2"}, {"cpu": "2"}),
    ({"min": {"memory": "64Mi"}, "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"}},
     {"memory": "64Mi", "cpu": "500m"}, {"cpu": "1"}),
])
def test_limit_range_item_defaulting(item: dict[str, Any], requests: dict[str, Any], limits: dict[str, Any]) -> None:
    defaults = container_defaults(limit_range("x", {"type": "Container", **item}))
    assert (dict(defaults.requests), dict(defaults.limits)) == (requests, limits)


def test_the_input_pod_is_not_mutated() -> None:
    obj = pod(container("app", limits={"cpu": "2"}), init=(container("init"),))
    before = copy.deepcopy(obj)
    apply_limit_range_defaults(obj, [DEFAULTS])
    assert obj == before


@pytest.mark.parametrize(("lr", "message"), [
    (limit_range("bad", {"type": "Container", "default": {"cpu": "lots"}}),
     "LimitRange team/bad: spec.limits[0].default.cpu: invalid quantity 'lots': quantities must match the "
     "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    (limit_range("bad", {"default": {"cpu": "1"}}),
     "LimitRange team/bad: spec.limits[0].type: expected one of Container, PersistentVolumeClaim, Pod, got None"),
    (limit_range("bad", "Container"), "LimitRange team/bad: spec.limits[0]: expected an object, got 'Container'"),
    ({"metadata": {"name": "bad", "namespace": "team"}, "spec": {"limits": {"type": "Container"}}},
     "LimitRange team/bad: spec.limits: expected a list, got {'type': 'Container'}"),
])
def test_a_malformed_limit_range_is_named_with_its_field(lr: dict[str, Any], message: str) -> None:
    with pytest.raises(LimitRangeError) as raised:
        apply_limit_range_defaults(pod(container("app")), [lr])
    assert str(raised.value) == message


def test_a_malformed_container_is_named_with_its_field() -> None:
    bad = pod(container("app"), init=({"name": "init", "resources": {"limits": ["1"]}},))
    with pytest.raises(ValueError, match=r"^spec\.initContainers\[0\]\.resources\.limits: expected an object"):
        apply_limit_range_defaults(bad, [DEFAULTS])


def test_a_daemonset_without_requests_reserves_its_namespace_defaults() -> None:
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "log-agent", "namespace": "team"},
          "spec": {"template": {"metadata": {"labels": {"app": "log-agent"}},
                                "spec": {"containers": [container("agent"), container("exporter", limits={"cpu": "1"})]}}}}
    assert daemonset_pod(ds).requests == {"cpu": 1000, "pods": 1}
    # agent: 250m/256Mi from the defaults; exporter: its 1 cpu limit and the 256Mi default request
    assert daemonset_pod(ds, [DEFAULTS]).requests == {"cpu": 1250, "memory": 512 * MIB, "pods": 1}
    assert daemonset_pod(ds, [limit_range("defaults", {"type": "Container", "defaultRequest": {"cpu": "9"}},
                                          namespace="kube-system")]).requests == {"cpu": 1000, "pods": 1}


def test_a_daemonset_names_a_malformed_limit_range_and_its_own_fields_under_spec_template() -> None:
    ds = {"metadata": {"name": "agent", "namespace": "team"},
          "spec": {"template": {"spec": {"containers": [{"name": "a", "resources": "none"}]}}}}
    with pytest.raises(ValueError, match=r"^spec\.template\.spec\.containers\[0\]\.resources: expected an object"):
        daemonset_pod(ds, [DEFAULTS])
    broken = limit_range("broken", {"type": "Container", "defaultRequest": {"memory": "-"}})
    with pytest.raises(LimitRangeError, match=r"^LimitRange team/broken: spec\.limits\[0\]\.defaultRequest\.memory: "):
        daemonset_pod({"metadata": {"name": "agent", "namespace": "team"},
                       "spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}}, [broken])
