"""Node labels and taints, job selectors and tolerations as validation reads them
(solver.app.validation.node_rules): each malformed rule refused with its field path, the
counts the server takes, and distinct rules times nodes bounded before any is resolved."""

from __future__ import annotations

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.validation import FieldViolation, validate_request
from tests.factories import make_request
from tests.test_node_rules import EXISTS, GT, IN, LT, NO_SCHEDULE, labelled, term


@pytest.mark.parametrize(
    ("edit", "violation"),
    [
        (
            lambda r: r.cluster.nodes[0].labels.update({"": "x"}),
            FieldViolation('cluster.nodes[0].labels[""]', "must not be empty"),
        ),
        (
            lambda r: r.cluster.nodes[0].labels.update({"a b": "x"}),
            FieldViolation(
                'cluster.nodes[0].labels["a b"]', 'must not contain white space, got "a b"'
            ),
        ),
        (
            lambda r: r.cluster.nodes[1].labels.update({"k": "x\x00"}),
            FieldViolation(
                'cluster.nodes[1].labels["k"]',
                "must contain printable characters only, got U+0000 at position 1",
            ),
        ),
        (
            lambda r: r.cluster.nodes[0].taints.add(key="k"),
            FieldViolation(
                "cluster.nodes[0].taints[0].effect",
                "must be NO_SCHEDULE, PREFER_NO_SCHEDULE or NO_EXECUTE, got 0",
            ),
        ),
        (
            lambda r: r.cluster.nodes[0].taints.extend(
                [
                    pb.Taint(key="k", effect=NO_SCHEDULE),
                    pb.Taint(key="k", value="v", effect=NO_SCHEDULE),
                ]
            ),
            FieldViolation(
                "cluster.nodes[0].taints[1]", 'duplicate key "k" and effect (also taints[0])'
            ),
        ),
        (
            lambda r: r.jobs[1].node_selector.add(),
            FieldViolation(
                "jobs[1].node_selector[0].requirements",
                "must not be empty (an empty term matches no node)",
            ),
        ),
        (
            lambda r: r.jobs[1].node_selector.append(term(("zone", IN, []))),
            FieldViolation(
                "jobs[1].node_selector[0].requirements[0].values",
                "must not be empty with IN or NOT_IN",
            ),
        ),
        (
            lambda r: r.jobs[1].node_selector.append(term(("zone", EXISTS, ["a"]))),
            FieldViolation(
                "jobs[1].node_selector[0].requirements[0].values",
                "must be empty with EXISTS or DOES_NOT_EXIST",
            ),
        ),
        (
            lambda r: r.jobs[2].node_selector.append(term(("z", IN, ["a"]), ("gen", GT, ["3.5"]))),
            FieldViolation(
                "jobs[2].node_selector[0].requirements[1].values",
                'must be one integer with GT or LT, got "3.5"',
            ),
        ),
        (
            lambda r: r.jobs[2].node_selector.append(term(("gen", LT, ["1", "2"]))),
            FieldViolation(
                "jobs[2].node_selector[0].requirements[0].values",
                "must be one integer with GT or LT, got 2 values",
            ),
        ),
        (
            lambda r: r.jobs[0].node_selector.append(term(("zone", 0, ["a"]))),
            FieldViolation(
                "jobs[0].node_selector[0].requirements[0].operator",
                "must be IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT or LT, got 0",
            ),
        ),
        (
            lambda r: r.jobs[0].node_selector.append(term(("", IN, ["a"]))),
            FieldViolation("jobs[0].node_selector[0].requirements[0].key", "must not be empty"),
        ),
        (
            lambda r: r.jobs[0].tolerations.add(key="k", operator=2, value="v"),
            FieldViolation("jobs[0].tolerations[0].value", "must be empty with EXISTS"),
        ),
        (
            lambda r: r.jobs[0].tolerations.add(value="v"),
            FieldViolation(
                "jobs[0].tolerations[0].key",
                "must not be empty with EQUAL (EXISTS with no key tolerates all)",
            ),
        ),
        (
            lambda r: r.jobs[0].tolerations.add(key="k", operator=7),
            FieldViolation("jobs[0].tolerations[0].operator", "must be EQUAL or EXISTS, got 7"),
        ),
        (
            lambda r: r.jobs[0].tolerations.add(key="k", effect=9),
            FieldViolation("jobs[0].tolerations[0].effect", "unknown effect 9"),
        ),
    ],
)
def test_each_malformed_rule_is_refused_with_its_field(edit: object, violation: object) -> None:
    r = make_request()
    edit(r)  # type: ignore[operator]
    assert validate_request(r, Limits()) == [violation]


def test_more_rules_than_the_server_takes_are_refused() -> None:
    r = make_request()
    r.cluster.nodes[0].labels.update({f"k{i}": "v" for i in range(3)})
    r.jobs[0].tolerations.extend([pb.Toleration(key="k")] * 3)
    r.jobs[1].node_selector.append(term(*[("zone", IN, ["a"])] * 3))
    assert validate_request(r, Limits(max_node_rules=2)) == [
        FieldViolation(
            "cluster.nodes[0].labels", "3 entries exceed the limit of 2 (max_node_rules)"
        ),
        FieldViolation("jobs[0].tolerations", "3 entries exceed the limit of 2 (max_node_rules)"),
        FieldViolation(
            "jobs[1].node_selector[0].requirements",
            "3 entries exceed the limit of 2 (max_node_rules)",
        ),
    ]
    assert validate_request(r, Limits(max_node_rules=3)) == []


def test_a_bad_label_is_reported_on_every_node_that_carries_it() -> None:
    """Keys and values are checked once a request; one found wrong is reported each time."""
    r = make_request()
    for n in r.cluster.nodes:
        n.labels.update({"zone": "a", "a b": "1", "ok": "bad\x07"})
    got = [v.field for v in validate_request(r, Limits())]
    assert got == [f'cluster.nodes[{i}].labels["{key}"]' for i in range(3) for key in ("a b", "ok")]


def test_distinct_rules_times_nodes_over_the_limit_are_refused_before_any_is_resolved() -> None:
    """Three nodes; two distinct rules (llm's, bert's and resnet's alike) make 6 pairs; a taint
    gives the jobs without rules one more rule (their own: tolerate nothing)."""
    r = labelled()
    r.jobs[0].node_selector.append(term(("zone", IN, ["a"])))
    for j in r.jobs[1:]:
        j.node_selector.append(term(("zone", IN, ["b"])))
    assert validate_request(r, Limits(max_rule_node_pairs=6)) == []
    assert validate_request(r, Limits(max_rule_node_pairs=5)) == [
        FieldViolation(
            "jobs",
            "2 distinct node rules (node_selector, node_preferences and tolerations) over 3 "
            "nodes make 6 "
            "rule-node pairs, above the limit of 5 (max_rule_node_pairs; each rule is resolved "
            "over every node within the time budget): give the jobs of one rule the same "
            "selector, or select by labels, not host names",
        )
    ]
    del r.jobs[2].node_selector[:]
    r.cluster.nodes[2].taints.add(key="x", effect=NO_SCHEDULE)
    assert validate_request(r, Limits(max_rule_node_pairs=8))[0].description.startswith(
        "3 distinct node rules"
    )
    assert validate_request(r, Limits(max_rule_node_pairs=9)) == []
    # A preference is resolved over every node too: one more rule; a PreferNoSchedule taint
    # gives every job one (its tolerations' own: bert's and resnet's alike).
    r.jobs[0].node_preferences.add(weight=5).preference.CopyFrom(term(("zone", IN, ["a"])))
    assert validate_request(r, Limits(max_rule_node_pairs=9))[0].description.startswith(
        "4 distinct node rules"
    )
    r.cluster.nodes[1].taints.add(key="soon", effect=pb.TAINT_EFFECT_PREFER_NO_SCHEDULE)
    assert validate_request(r, Limits(max_rule_node_pairs=14))[0].description.startswith(
        "5 distinct node rules"
    )
    assert validate_request(r, Limits(max_rule_node_pairs=15)) == []
