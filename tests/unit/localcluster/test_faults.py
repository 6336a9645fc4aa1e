"""The fault proxy's decisions, without its sockets: which call fails how, the ClientToken memory, EC2's error bodies."""

import botocore.session
import pytest
from botocore.parsers import create_parser

from localcluster.faults import (
    FORWARDED,
    KINDS,
    LOST,
    REPLAYED,
    THROTTLE,
    UNAVAILABLE,
    Answer,
    FaultPlan,
    Injector,
    action_of,
    error_answer,
)

OK = Answer(200, (("Content-Type", "text/xml"),), b"<CreateFleetResponse/>")


def test_the_action_comes_from_the_query_body_or_the_json_target():
    body = b"Action=CreateFleet&Version=2016-11-15&ClientToken=groupless-abc&Type=instant"
    assert action_of({"Content-Type": "application/x-www-form-urlencoded"}, body) == (
        "CreateFleet", {"Action": "CreateFleet", "Version": "2016-11-15", "ClientToken": "groupless-abc",
                        "Type": "instant"})
    assert action_of({"X-Amz-Target": "AmazonSSM.GetParameter"}, b'{"Name": "/aws/x"}') == ("GetParameter", {})
    assert action_of({}, b"\xff\xfe") == ("", {})


def test_a_plan_refuses_a_rate_outside_0_to_1_and_unknown_faults():
    with pytest.raises(ValueError, match="rate must be between 0 and 1, got 1.5"):
        FaultPlan(rate=1.5)
    with pytest.raises(ValueError, match="kinds must be some of throttle, unavailable, lost, got crash"):
        FaultPlan(rate=0.5, kinds=("crash",))
    with pytest.raises(ValueError, match="unknown faults crash"):
        Injector().inject_next("CreateFleet", "crash")


def test_calls_fail_at_the_plans_rate_with_faults_drawn_evenly():
    injector = Injector(FaultPlan(rate=0.3), seed=7)
    decisions = [injector.decide("CreateFleet") for _ in range(3000)]
    failed = [d for d in decisions if d is not None]
    assert 0.27 < len(failed) / len(decisions) < 0.33
    for kind in KINDS:
        assert 0.28 < failed.count(kind) / len(failed) < 0.39
    assert sum(injector.counts().values()) == len(failed)


def test_only_the_plans_actions_fail_and_a_rate_of_zero_fails_nothing():
    injector = Injector(FaultPlan(rate=1.0, kinds=(THROTTLE,), actions=frozenset({"CreateFleet"})), seed=1)
    assert [injector.decide(a) for a in ("CreateFleet", "DescribeInstances", "CreateFleet")] == [THROTTLE, None, THROTTLE]
    injector.plan = FaultPlan(rate=0.0)
    assert {injector.decide("CreateFleet") for _ in range(100)} == {None}
    assert injector.counts() == {("CreateFleet", THROTTLE): 2}


def test_injected_faults_come_first_in_order_then_the_plan():
    injector = Injector(FaultPlan(rate=0.0))
    injector.inject_next("CreateFleet", LOST, UNAVAILABLE)
    assert [injector.decide("TerminateInstances"), injector.decide("CreateFleet"), injector.decide("CreateFleet"),
            injector.decide("CreateFleet")] == [None, LOST, UNAVAILABLE, None]


def test_a_client_token_that_succeeded_gets_its_first_answer_again():
    injector = Injector()
    assert injector.replay("CreateFleet", "t-1") is None
    injector.forwarded("CreateFleet", "t-1", OK)
    injector.forwarded("CreateFleet", "t-1", Answer(200, (), b"<second/>"))  # the first answer is kept
    assert injector.replay("CreateFleet", "t-1") == OK
    assert injector.replay("RunInstances", "t-1") is None  # per action
    assert injector.replay("CreateFleet", "") is None  # no token: no idempotency
    injector.forwarded("CreateFleet", "t-2", Answer(503, (), b"<error/>"))
    assert injector.replay("CreateFleet", "t-2") is None  # a failure is not remembered: a retry launches
    assert injector.counts() == {("CreateFleet", FORWARDED): 3, ("CreateFleet", REPLAYED): 1}


def _parse_ec2_error(answer: Answer) -> dict[str, object]:
    model = botocore.session.get_session().get_service_model("ec2").operation_model("CreateFleet")
    response = {"status_code": answer.status, "headers": dict(answer.headers), "body": answer.body}
    parsed: dict[str, object] = create_parser("ec2").parse(response, model.output_shape)
    return parsed


@pytest.mark.parametrize(("kind", "code"), [(THROTTLE, "RequestLimitExceeded"), (UNAVAILABLE, "Unavailable")])
def test_error_answers_read_as_ec2s_to_botocore(kind, code):
    answer = error_answer(kind, json_protocol=False)
    assert answer.status == 503
    assert _parse_ec2_error(answer)["Error"] == {"Code": code, "Message": error_answer(kind, False).body.decode()
                                                 .split("<Message>")[1].split("</Message>")[0]}


def test_json_protocol_errors_name_the_exception_type():
    answer = error_answer(THROTTLE, json_protocol=True)
    assert (answer.status, answer.body) == (400, b'{"__type": "ThrottlingException", "message": "Request limit exceeded."}')
    assert error_answer(UNAVAILABLE, json_protocol=True).status == 503
