"""The fairness knobs outside the solver: TOML profiles, overrides (the CLI's flags), the
sweep's grid, and the example request of each mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits, parse_fairness_mode
from solver.app.overrides import Overrides, prepare
from solver.app.profile import ProfileError, format_profile, profile_from_dict
from solver.app.validation import validate_request
from solver.domain import FairnessMode, FairnessScope
from solver.offline.sweep.grid import parse_weight_spec
from tests.factories import make_request

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_profile_sets_the_policy_the_request_leaves_unset() -> None:
    profile = profile_from_dict(
        {
            "weights": {"fairness": 4.0},
            "fairness": {"mode": "drf", "scope": "tenant", "horizon": "10m", "mean_weight": 2},
        }
    )
    r = make_request()
    p = problem_from_proto(prepare(r, profile), Limits())
    assert (p.fairness.mode, p.fairness.scope) == (FairnessMode.DRF, FairnessScope.TENANT)
    assert p.fairness.horizon_seconds == 600.0 and p.weights.fairness == 4.0
    assert p.fairness.mean_weight == 2.0
    r.fairness.mode = pb.FAIRNESS_MODE_MAX_MIN  # the request's own wins
    assert problem_from_proto(prepare(r, profile), Limits()).fairness.mode is FairnessMode.MAX_MIN
    text = format_profile(profile)
    assert 'mode = "drf"' in text and 'horizon = "600s"' in text and "fairness = 4.0" in text
    assert "mean_weight = 2.0" in text
    assert profile_from_dict({"fairness": {"mean_weight": 2.0}}) == profile_from_dict(
        {"fairness": {"mean_weight": 2}}
    )


def test_every_bad_fairness_key_of_a_profile_is_named() -> None:
    with pytest.raises(ProfileError) as e:
        profile_from_dict(
            {
                "fairness": {
                    "mode": "fairest",
                    "scope": 3,
                    "horizon": "9d",
                    "x": 1,
                    "mean_weight": -1,
                }
            }
        )
    text = str(e.value)
    keys = (
        "fairness.mode",
        "fairness.scope",
        "fairness.horizon",
        "fairness.x",
        "fairness.mean_weight",
    )
    for key in keys:
        assert key in text, text
    with pytest.raises(ProfileError, match=r"fairness\.mean_weight.*number"):
        profile_from_dict({"fairness": {"mean_weight": "much"}})
    assert "max_min" in text  # the valid modes are listed


def test_overrides_win_over_the_request() -> None:
    r = make_request()
    r.fairness.mode = pb.FAIRNESS_MODE_DRF
    out = prepare(
        r,
        overrides=Overrides(
            weights={"fairness": 0.5},
            fairness_mode=parse_fairness_mode("finish-time"),
            fairness_scope=FairnessScope.TENANT,
            fairness_horizon_seconds=90.0,
            fairness_mean_weight=0.25,
        ),
    )
    assert out.fairness.mode == pb.FAIRNESS_MODE_FINISH_TIME
    assert out.fairness.scope == pb.FAIRNESS_SCOPE_TENANT
    assert out.fairness.horizon.seconds == 90 and out.weights.fairness == 0.5
    assert out.fairness.mean_weight == 0.25


def test_the_sweep_sweeps_the_fairness_weight() -> None:
    assert parse_weight_spec("fairness=0,1,10") == ("fairness", [0.0, 1.0, 10.0])


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("max-min", pb.FAIRNESS_MODE_MAX_MIN),
        ("proportional", pb.FAIRNESS_MODE_PROPORTIONAL),
        ("drf", pb.FAIRNESS_MODE_DRF),
        ("finish-time", pb.FAIRNESS_MODE_FINISH_TIME),
    ],
)
def test_each_mode_has_a_valid_example(name: str, mode: int) -> None:
    r = load_request_json(EXAMPLES / f"fairness-{name}.json")
    assert r.fairness.mode == mode
    assert validate_request(r, Limits()) == []
    assert any(q.attained.normalized_seconds > 0 for q in r.cluster.queues)
