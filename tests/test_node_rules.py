"""Node labels and taints, job selectors and tolerations (Kubernetes' meaning): resolved into
the job's excluded nodes at the edge, honoured by a solve and judged by EvaluatePlan. The
resolution is compared with a plain reading of Kubernetes' rules on random clusters. Their
validation: tests/test_validation_node_rules.py."""

from __future__ import annotations

import random
from pathlib import Path

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.wire import load_request_json, message_to_json
from tests.cli_helpers import run
from tests.factories import make_request
from tests.service_helpers import WAIT, serving

IN, NOT_IN, EXISTS, ABSENT, GT, LT = (
    pb.LABEL_OPERATOR_IN,
    pb.LABEL_OPERATOR_NOT_IN,
    pb.LABEL_OPERATOR_EXISTS,
    pb.LABEL_OPERATOR_DOES_NOT_EXIST,
    pb.LABEL_OPERATOR_GT,
    pb.LABEL_OPERATOR_LT,
)
NO_SCHEDULE, PREFER, NO_EXECUTE = (
    pb.TAINT_EFFECT_NO_SCHEDULE,
    pb.TAINT_EFFECT_PREFER_NO_SCHEDULE,
    pb.TAINT_EFFECT_NO_EXECUTE,
)


def term(*requirements: tuple[str, int, list[str]]) -> pb.NodeSelectorTerm:
    out = pb.NodeSelectorTerm()
    for key, operator, values in requirements:
        out.requirements.add(key=key, values=values).operator = operator  # type: ignore[assignment]
    return out


def excluded(r: pb.SolveRequest, job: int = 0) -> set[str]:
    assert validate_request(r, Limits()) == []
    return set(problem_from_proto(r, Limits()).jobs[job].excluded_nodes)


def labelled() -> pb.SolveRequest:
    """make_request's three nodes labelled: a100-0 spot in zone a, a100-1 reserved in zone b,
    h100-0 reserved in zone a with a generation label."""
    r = make_request()
    r.cluster.nodes[0].labels.update({"zone": "a", "spot": ""})
    r.cluster.nodes[1].labels.update({"zone": "b", "gen": "3"})
    r.cluster.nodes[2].labels.update({"zone": "a", "gen": "4"})
    return r


@pytest.mark.parametrize(
    ("terms", "barred"),
    [
        ([term(("zone", IN, ["a"]))], {"a100-1"}),
        ([term(("zone", NOT_IN, ["a"]))], {"a100-0", "h100-0"}),
        ([term(("gen", NOT_IN, ["3"]))], {"a100-1"}),  # no label: not in
        ([term(("spot", EXISTS, []))], {"a100-1", "h100-0"}),
        ([term(("spot", ABSENT, []))], {"a100-0"}),
        ([term(("gen", GT, ["3"]))], {"a100-0", "a100-1"}),  # no label: no match
        ([term(("gen", LT, ["4"]))], {"a100-0", "h100-0"}),
        ([term(("zone", IN, ["a"]), ("gen", EXISTS, []))], {"a100-0", "a100-1"}),  # AND
        ([term(("spot", EXISTS, [])), term(("zone", IN, ["b"]))], {"h100-0"}),  # OR
        ([term(("rack", IN, ["x"]))], {"a100-0", "a100-1", "h100-0"}),  # no node has it
        ([term(("rack", ABSENT, []))], set()),
    ],
)
def test_each_operator_bars_the_nodes_kubernetes_would(
    terms: list[pb.NodeSelectorTerm], barred: set[str]
) -> None:
    r = labelled()
    r.jobs[0].node_selector.extend(terms)
    assert excluded(r) == barred
    assert excluded(r, 1) == set()  # another job's rule is not its own


def test_a_node_label_gt_reads_integers_only() -> None:
    r = labelled()
    r.cluster.nodes[0].labels["gen"] = "4.5"  # no integer: matches neither GT nor LT
    r.cluster.nodes[1].labels["gen"] = "+7"
    r.jobs[0].node_selector.append(term(("gen", GT, ["3"])))
    assert excluded(r) == {"a100-0"}
    r.jobs[0].node_selector[0].requirements[0].operator = LT
    r.jobs[0].node_selector[0].requirements[0].values[0] = "10"
    assert excluded(r) == {"a100-0"}


def test_hard_taints_bar_a_job_that_does_not_tolerate_them() -> None:
    r = labelled()
    r.cluster.nodes[2].taints.add(key="dedicated", value="llm", effect=NO_SCHEDULE)
    r.cluster.nodes[1].taints.add(key="maintenance", effect=NO_EXECUTE)
    r.cluster.nodes[0].taints.add(key="spot", effect=PREFER)  # a preference: ignored
    assert excluded(r) == {"a100-1", "h100-0"}
    tol = r.jobs[0].tolerations
    tol.add(key="dedicated", operator=pb.TOLERATION_OPERATOR_EQUAL, value="other")
    assert excluded(r) == {"a100-1", "h100-0"}  # another value
    tol.add(key="dedicated", value="llm", effect=NO_EXECUTE)  # EQUAL by default; another effect
    assert excluded(r) == {"a100-1", "h100-0"}
    tol.add(key="dedicated", value="llm")  # any effect
    assert excluded(r) == {"a100-1"}
    del tol[:]
    tol.add(key="maintenance", operator=pb.TOLERATION_OPERATOR_EXISTS, effect=NO_EXECUTE)
    assert excluded(r) == {"h100-0"}
    del tol[:]
    tol.add(operator=pb.TOLERATION_OPERATOR_EXISTS)  # tolerates everything
    assert excluded(r) == set()


def test_selector_taints_and_excluded_nodes_add_up_and_rules_are_shared() -> None:
    r = labelled()
    r.cluster.nodes[1].taints.add(key="dedicated", value="x", effect=NO_SCHEDULE)
    for j in r.jobs:
        j.node_selector.append(term(("zone", IN, ["a", "b"])))
    r.jobs[0].excluded_nodes.append("h100-0")
    p = problem_from_proto(r, Limits())
    llm, bert, resnet = p.jobs
    assert llm.excluded_nodes == {"a100-1", "h100-0"}
    assert bert.excluded_nodes == {"a100-1"}
    assert resnet.excluded_nodes is bert.excluded_nodes  # one set per distinct rule
    assert resnet.barred_nodes == {"a100-1"}  # it runs on a100-0, which it may keep


def _reference_usable(node: pb.Node, job: pb.Job) -> bool:
    """Kubernetes' rules, read plainly, one node at a time."""

    def holds(req: pb.LabelRequirement) -> bool:
        has = req.key in node.labels
        value = node.labels.get(req.key, "")
        if req.operator == IN:
            return has and value in req.values
        if req.operator == NOT_IN:
            return not has or value not in req.values
        if req.operator == EXISTS:
            return has
        if req.operator == ABSENT:
            return not has
        try:
            n, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return has and (n > bound if req.operator == GT else n < bound)

    selected = not job.node_selector or any(
        all(holds(q) for q in t.requirements) for t in job.node_selector
    )

    def tolerated(taint: pb.Taint) -> bool:
        for t in job.tolerations:
            if t.effect and t.effect != taint.effect:
                continue
            if t.operator == pb.TOLERATION_OPERATOR_EXISTS and t.key in ("", taint.key):
                return True
            if t.operator != pb.TOLERATION_OPERATOR_EXISTS and (t.key, t.value) == (
                taint.key,
                taint.value,
            ):
                return True
        return False

    hard = [t for t in node.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)]
    return selected and all(tolerated(t) for t in hard)


@pytest.mark.parametrize("seed", range(12))
def test_the_resolution_agrees_with_a_plain_reading_on_random_clusters(seed: int) -> None:
    rng = random.Random(seed)
    r = make_request()
    keys, values = ["zone", "gen", "spot", "pool"], ["1", "2", "3", "a", "b"]
    base = r.cluster.nodes[0]
    del r.cluster.nodes[:]
    del r.cluster.rack_power_budgets[:]
    for k in range(30):
        n = r.cluster.nodes.add()
        n.CopyFrom(base)
        n.name = f"n{k}"
        for key in rng.sample(keys, rng.randint(0, 4)):
            n.labels[key] = rng.choice(values)
        for key in rng.sample(["dedicated", "gpu"], rng.randint(0, 2)):
            n.taints.add(key=key, value=rng.choice(["a", "b"]), effect=rng.choice([1, 2, 3]))
    for job in r.jobs:
        job.ClearField("current_allocation")
        for _ in range(rng.randint(0, 3)):
            t = job.node_selector.add()
            for _ in range(rng.randint(1, 3)):
                op = rng.choice([IN, NOT_IN, EXISTS, ABSENT, GT, LT])
                vals = (
                    []
                    if op in (EXISTS, ABSENT)
                    else [str(rng.randint(0, 4))]
                    if op in (GT, LT)
                    else rng.sample(values, rng.randint(1, 3))
                )
                t.requirements.add(key=rng.choice(keys), operator=op, values=vals)
        for _ in range(rng.randint(0, 2)):
            tol = rng.choice([pb.TOLERATION_OPERATOR_EQUAL, pb.TOLERATION_OPERATOR_EXISTS])
            key = rng.choice(["dedicated", "gpu", ""] if tol == 2 else ["dedicated", "gpu"])
            job.tolerations.add(
                key=key,
                operator=tol,
                value="" if tol == 2 else rng.choice(["a", "b"]),
                effect=rng.choice([0, 1, 3]),
            )
    assert validate_request(r, Limits()) == []
    p = problem_from_proto(r, Limits())
    for job, domain in zip(r.jobs, p.jobs, strict=True):
        want = {n.name for n in r.cluster.nodes if not _reference_usable(n, job)}
        assert set(domain.excluded_nodes) == want


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "node-rules.json"


def example() -> pb.SolveRequest:
    """examples/node-rules.json: the labelled nodes, a100-0 tainted spot (NoSchedule), llm
    confined to zone a; regenerate the file from here (json_format.MessageToJson with
    preserving_proto_field_name and indent 1)."""
    r = labelled()
    r.options.time_budget.FromMilliseconds(2000)
    r.cluster.nodes[0].taints.add(key="spot", effect=NO_SCHEDULE)
    r.jobs[0].node_selector.append(term(("zone", IN, ["a"])))  # llm: a100-0 or h100-0
    return r


def test_the_example_is_the_request_and_valid() -> None:
    assert load_request_json(EXAMPLE) == example()
    assert validate_request(example(), Limits()) == []


def test_a_solve_through_the_server_honours_selectors_and_evaluate_plan_judges_them() -> None:
    r = example()
    with serving() as (_, stub):
        response = stub.Solve(r, timeout=WAIT)
        on = {a.job: {s.node for s in a.placement} for a in response.plan.assignments}
        moved = pb.Plan()
        moved.CopyFrom(response.plan)
        [bert] = [a for a in moved.assignments if a.job == "bert"]
        gpus = sum(len(s.gpu_indices) for s in bert.placement)
        del bert.placement[:]
        bert.placement.add(node="a100-0", gpu_indices=list(range(4, 4 + gpus)))
        evaluated = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=r, plan=moved), timeout=WAIT)
        bad = pb.SolveRequest()
        bad.CopyFrom(r)
        del bad.jobs[0].node_selector[0].requirements[0].values[:]
        with pytest.raises(grpc.RpcError) as e:
            stub.Solve(bad, timeout=WAIT)
    assert on["llm"] == {"h100-0"}  # a100-0 is tainted, a100-1 in zone b
    assert on["bert"] == {"a100-1"}  # a100-0's taint is not tolerated
    assert on["resnet"] == {"a100-0"}  # it runs there: it may stay
    assert gpus and not evaluated.valid
    assert [(v.constraint, v.job) for v in evaluated.violations] == [("excluded_node", "bert")]
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "jobs[0].node_selector[0].requirements[0].values" in (e.value.details() or "")


def test_validate_says_how_many_nodes_each_job_may_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = labelled()
    r.cluster.nodes[2].taints.add(key="dedicated", effect=NO_EXECUTE)
    r.jobs[0].node_selector.append(term(("zone", IN, ["a"])))
    with serving() as (_, stub):
        summary = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=r), timeout=WAIT)
    assert [(j.job, j.usable_nodes) for j in summary.jobs] == [
        ("llm", 1),
        ("bert", 2),
        ("resnet", 2),
    ]
    path = tmp_path / "request.json"
    path.write_text(message_to_json(r))
    code, out, err = run(capsys, "validate", str(path))
    assert code == 0, err
    assert [line.split("samples/s")[1] for line in out.splitlines()[1:4]] == [
        ", 1 of 3 nodes usable",
        ", 2 of 3 nodes usable",
        ", 2 of 3 nodes usable",
    ]
    r.cluster.nodes[2].ClearField("taints")
    path.write_text(message_to_json(r))
    code, out, err = run(capsys, "validate", str(path))
    assert [line.split("samples/s")[1] for line in out.splitlines()[1:4]] == [
        ", 2 of 3 nodes usable",
        "",
        "",
    ]
