"""Operator profiles: loading, every kind of validation error, precedence, `profile show`."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits, format_duration, parse_duration
from solver.app.profile import Profile, ProfileError, apply_profile, format_profile, load_profile
from solver.app.validation import duration_seconds
from solver.domain import Backend
from solver.offline import commands as offline_cli

GOOD = """
[weights]
energy = 0.2
migration = 1      # an integer is a number too

[solver]
time_budget = "1.5s"
backend = "heuristic"
relative_gap = 0.01
threads = 2
seed = 7
"""


def write(tmp_path: Path, text: str, name: str = "prod.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def errors_of(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    for line in info.value.problems:
        assert line.startswith(f"{path}: "), line  # every problem names the file
    return info.value.problems


def test_loads_the_keys_it_sets_and_fills_defaults(tmp_path: Path) -> None:
    p = load_profile(write(tmp_path, GOOD))
    assert p.weights.energy == 0.2
    assert p.weights.migration == 1.0
    assert p.weights.throughput is None
    s = p.solver
    assert (s.time_budget_seconds, s.backend, s.relative_gap, s.threads, s.seed) == (
        1.5,
        Backend.HEURISTIC,
        0.01,
        2,
        7,
    )
    assert s.pyomo_solver is None
    w = p.effective_weights()
    assert (w.throughput, w.energy, w.locality, w.deadline) == (1.0, 0.2, 0.01, 0.5)
    assert p.effective_options().pyomo_solver == ""


def test_empty_profile_is_all_defaults(tmp_path: Path) -> None:
    p = load_profile(write(tmp_path, ""))
    assert p.effective_weights().energy == 0.1
    assert p.effective_options().time_budget_seconds == 5.0
    assert p.effective_options().backend is Backend.AUTO


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("[wieghts]\nenergy = 1\n", "wieghts", "unknown key"),
        ("[weights]\nenergie = 1\n", "weights.energie", "unknown key"),
        ("[solver]\ntimeout = 1\n", "solver.timeout", "unknown key"),
        ("weights = 3\n", "weights", "must be a table"),
        ('[weights]\nenergy = "high"\n', "weights.energy", "must be a number"),
        ("[weights]\nenergy = true\n", "weights.energy", "must be a number"),
        ("[weights]\nenergy = nan\n", "weights.energy", "finite"),
        ("[weights]\nenergy = -0.1\n", "weights.energy", "must be >= 0"),
        ("[solver]\nthreads = 1.5\n", "solver.threads", "must be an integer"),
        ("[solver]\nthreads = 1000\n", "solver.threads", "[0, 256]"),
        ("[solver]\nseed = -1\n", "solver.seed", "must be in"),
        ("[solver]\nseed = true\n", "solver.seed", "must be an integer"),
        ('[solver]\ntime_budget = "5 parsecs"\n', "solver.time_budget", "invalid duration"),
        ('[solver]\ntime_budget = "0s"\n', "solver.time_budget", "must be > 0"),
        ("[solver]\ntime_budget = -2\n", "solver.time_budget", "positive"),
        ("[solver]\ntime_budget = [1]\n", "solver.time_budget", "duration"),
        ('[solver]\nbackend = "gurobi"\n', "solver.backend", "unknown backend"),
        ("[solver]\nbackend = 3\n", "solver.backend", "must be a string"),
        ("[solver]\nrelative_gap = 1.5\n", "solver.relative_gap", "[0, 1)"),
        ('[solver]\npyomo_solver = "cbc"\n', "solver.pyomo_solver", 'backend = "pyomo"'),
        ("[carbon]\nmin_saving = 1.0\n", "carbon.min_saving", "[0, 1)"),
        ("[carbon]\nsaving_per_delay = -1\n", "carbon.saving_per_delay", "[0, 100]"),
        ("[carbon]\nsaving_per_delay = nan\n", "carbon.saving_per_delay", "[0, 100]"),
        ('[carbon]\nscale_energy = "yes"\n', "carbon.scale_energy", "true or false"),
        ("[carbon]\nmin_savings = 0.1\n", "carbon.min_savings", "unknown key"),
    ],
)
def test_each_kind_of_error_names_file_and_key(
    tmp_path: Path, text: str, key: str, words: str
) -> None:
    (problem,) = errors_of(tmp_path, text)
    assert f": {key}: " in problem
    assert words in problem


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    problems = errors_of(
        tmp_path, '[weights]\nenergy = -1\nfoo = 2\n[solver]\nbackend = "x"\nseed = "s"\n'
    )
    assert len(problems) == 4


def test_syntax_and_read_errors_name_the_file(tmp_path: Path) -> None:
    (problem,) = errors_of(tmp_path, "[weights\nenergy = 1\n")
    assert "invalid TOML" in problem
    with pytest.raises(ProfileError, match=r"missing\.toml: cannot read"):
        load_profile(tmp_path / "missing.toml")


def test_durations_round_trip() -> None:
    for text, seconds in (("500ms", 0.5), ("5s", 5.0), ("1.5s", 1.5), ("2m", 120.0), ("3", 3.0)):
        assert parse_duration(text) == seconds
        assert parse_duration(format_duration(seconds)) == seconds


def test_request_fields_win_over_the_profile(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD))
    req = pb.SolveRequest()
    req.weights.energy = 0.0  # explicitly set, even to zero: wins
    req.options.time_budget.FromSeconds(9)
    req.options.seed = 3
    apply_profile(req, profile)
    assert req.weights.energy == 0.0
    assert req.weights.migration == 1.0  # unset: from the profile
    assert not req.weights.HasField("throughput")  # the profile doesn't set it: default later
    assert duration_seconds(req.options.time_budget) == 9
    assert req.options.seed == 3
    assert req.options.backend == pb.BACKEND_HEURISTIC
    assert req.options.relative_gap == 0.01
    assert req.options.threads == 2


def test_unset_request_takes_the_profile_then_the_defaults(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD))
    req = pb.SolveRequest()
    apply_profile(req, profile)
    assert duration_seconds(req.options.time_budget) == 1.5
    assert req.options.seed == 7
    # The converter then fills what neither set with the built-in defaults.
    from tests.factories import make_request

    full = make_request()
    full.ClearField("weights")
    full.options.ClearField("time_budget")
    apply_profile(full, Profile())
    problem = problem_from_proto(full, Limits())
    assert problem.weights.energy == 0.1
    assert problem.options.time_budget_seconds == Limits().default_time_budget_seconds


def test_zero_valued_options_count_as_unset(tmp_path: Path) -> None:
    """No presence on the wire: seed 0 in the request can't beat the profile's seed 7."""
    profile = load_profile(write(tmp_path, GOOD))
    req = pb.SolveRequest()
    req.options.seed = 0
    apply_profile(req, profile)
    assert req.options.seed == 7


def test_format_profile_is_loadable_toml_with_defaults_marked(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD))
    text = format_profile(profile)
    assert "energy = 0.2\n" in text
    assert "throughput = 1.0  # default" in text
    assert 'time_budget = "1.5s"\n' in text
    again = load_profile(write(tmp_path, text, "again.toml"))
    assert again.effective_weights() == profile.effective_weights()
    assert again.effective_options() == profile.effective_options()
    assert tomllib.loads(text)["solver"]["backend"] == "heuristic"


def test_profile_show_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, GOOD)
    assert offline_cli.main(["profile", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "[weights]" in out and "seed = 7" in out
    bad = write(tmp_path, "[weights]\nenergy = -1\n", "bad.toml")
    assert offline_cli.main(["profile", "show", str(bad)]) == 2
    assert f"{bad}: weights.energy" in capsys.readouterr().err


def test_profile_option_rejects_a_bad_profile_as_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "[solver]\nthreads = -1\n", "bad.toml")
    code = offline_cli.main(["batch", str(tmp_path), "--profile", str(bad)])
    assert code == 2
    assert "solver.threads" in capsys.readouterr().err


def test_example_profile_is_valid() -> None:
    examples = sorted(Path(__file__).resolve().parent.parent.glob("examples/*.toml"))
    assert examples
    for path in examples:
        load_profile(path)


CARBON = """
[carbon]
min_saving = 0.2
saving_per_delay = 0.25
"""


def test_the_carbon_table_fills_a_grid_the_request_leaves_open(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, CARBON))
    with_grid = pb.SolveRequest()
    with_grid.cluster.grid.points.add(carbon_g_per_kwh=300.0)
    with_grid.cluster.grid.saving_per_delay = 0.5  # the request's own value wins
    apply_profile(with_grid, profile)
    g = with_grid.cluster.grid
    assert g.min_saving == pytest.approx(0.2) and g.saving_per_delay == 0.5
    assert not g.scale_energy
    without = pb.SolveRequest()
    apply_profile(without, profile)
    assert not without.cluster.HasField("grid")  # the forecast comes from the scheduler
    text = format_profile(profile)
    assert "min_saving = 0.2\n" in text and "scale_energy = false  # default" in text
    again = load_profile(write(tmp_path, text, "again.toml"))
    c, d = again.carbon, profile.carbon  # the same effective values
    assert (c.min_saving, c.saving_per_delay, bool(c.scale_energy)) == (0.2, 0.25, False)
    assert (d.min_saving, d.saving_per_delay, d.scale_energy) == (0.2, 0.25, None)
