"""The instance generator: determinism, counts, validity, measured values, checked-in files."""

from __future__ import annotations

import csv
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.offline import generate as g
from tests.factories import solve

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
README = INSTANCES / "README.md"


def documented_commands() -> dict[str, list[str]]:
    """Instance file name -> generator arguments, as instances/README.md documents them."""
    out = {}
    for line in README.read_text().splitlines():
        m = re.search(r"dsfro generate (.*--out instances/(\S+\.json).*?)`?$", line)
        if m:
            out[m.group(2)] = shlex.split(m.group(1).rstrip("`"))
    return out


@pytest.fixture(scope="module")
def medium() -> pb.SolveRequest:
    return g.generate(g.spec_from_args(documented_commands()["medium.json"]))


@pytest.fixture(scope="module")
def pai() -> pb.SolveRequest:
    return g.generate(g.spec_from_args(documented_commands()["pai.json"]))


def load(name: str) -> pb.SolveRequest:
    return json_format.Parse((INSTANCES / name).read_text(), pb.SolveRequest())


def check_valid(r: pb.SolveRequest) -> None:
    """Every name unique and every reference valid, as the wire contract requires."""
    types = {t.name: t for t in r.cluster.gpu_types}
    assert len(types) == len(r.cluster.gpu_types)
    nodes = {n.name: n for n in r.cluster.nodes}
    assert len(nodes) == len(r.cluster.nodes)
    assert len({j.name for j in r.jobs}) == len(r.jobs)
    for n in r.cluster.nodes:
        assert n.gpu_type in types and n.gpu_count >= 1 and n.rack
        assert n.network_bandwidth_gbps > 0
        assert len(set(n.unavailable_gpu_indices)) == len(n.unavailable_gpu_indices)
        assert all(0 <= i < n.gpu_count for i in n.unavailable_gpu_indices)
    assert {n.gpu_type for n in r.cluster.nodes} == set(types)
    used: set[tuple[str, int]] = set()
    for j in r.jobs:
        assert 1 <= j.min_gpus <= j.max_gpus
        assert j.WhichOneof("workload") in ("model", "profile")
        assert all(t in types for t in j.allowed_gpu_types)
        assert 1.0 <= j.weight <= 4.0
        if j.HasField("time_to_deadline"):
            assert j.time_to_deadline.seconds > 0 and j.remaining_samples > 0
        for p in j.profile.points:
            assert p.gpu_type in types
            assert p.sm_clock_mhz in types[p.gpu_type].sm_clocks_mhz
            assert p.tensor_parallel == p.pipeline_parallel == 1
            assert p.samples_per_second > 0 and p.watts > 0 and p.memory_per_gpu_gib > 0
            assert j.min_gpus <= p.num_gpus <= j.max_gpus
        if j.HasField("profile"):
            assert j.profile.points
        if j.HasField("preemptible"):
            assert not j.preemptible and j.HasField("current_allocation")
        if not j.HasField("current_allocation"):
            continue
        a = j.current_allocation
        assert a.gpu_type in types
        assert not j.allowed_gpu_types or a.gpu_type in j.allowed_gpu_types
        assert a.sm_clock_mhz in types[a.gpu_type].sm_clocks_mhz
        placed = 0
        for s in a.placement:
            node = nodes[s.node]
            assert node.gpu_type == a.gpu_type
            assert len(s.gpu_indices) % a.tensor_parallel == 0, "tensor group split over nodes"
            for i in s.gpu_indices:
                assert 0 <= i < node.gpu_count and i not in node.unavailable_gpu_indices
                assert (s.node, i) not in used, "GPU allocated twice"
                used.add((s.node, i))
            placed += len(s.gpu_indices)
        assert a.data_parallel * a.tensor_parallel * a.pipeline_parallel == placed
        assert j.min_gpus <= placed <= j.max_gpus
        if j.HasField("profile"):
            assert (a.gpu_type, placed) in {(p.gpu_type, p.num_gpus) for p in j.profile.points}


def test_same_seed_same_bytes_other_seed_differs() -> None:
    spec = g.spec_from_args(["--nodes", "16", "--jobs", "32", "--seed", "7"])
    assert g.to_json(g.generate(spec)) == g.to_json(g.generate(spec))
    other = g.spec_from_args(["--nodes", "16", "--jobs", "32", "--seed", "8"])
    assert g.to_json(g.generate(spec)) != g.to_json(g.generate(other))


def test_medium_counts(medium: pb.SolveRequest) -> None:
    assert len(medium.cluster.nodes) == 128
    assert sum(n.gpu_count for n in medium.cluster.nodes) == 1024
    assert len(medium.cluster.gpu_types) == 4
    assert len(medium.jobs) == 256
    assert sum(j.HasField("profile") for j in medium.jobs) == 128
    unavailable = sum(len(n.unavailable_gpu_indices) for n in medium.cluster.nodes)
    assert unavailable == round(0.01 * 1024)
    assert any(j.HasField("current_allocation") for j in medium.jobs)
    assert any(j.HasField("preemptible") for j in medium.jobs)
    assert any(j.HasField("time_to_deadline") for j in medium.jobs)
    assert any(j.allowed_gpu_types for j in medium.jobs)
    assert {j.max_gpus for j in medium.jobs} > {1, 2, 4, 8}


def test_medium_valid(medium: pb.SolveRequest) -> None:
    check_valid(medium)


def test_pai_mix_follows_machine_spec(pai: pb.SolveRequest) -> None:
    check_valid(pai)
    per_node = {n.gpu_type: n.gpu_count for n in pai.cluster.nodes}
    assert per_node == {"P100-16GB": 2, "T4": 2, "V100-16GB": 8, "V100-32GB": 8}
    nodes = Counter(n.gpu_type for n in pai.cluster.nodes)
    assert nodes["P100-16GB"] > nodes["T4"] > nodes["V100-32GB"] >= nodes["V100-16GB"]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mix", sorted(g.MIXES))
def test_every_mix_valid(mix: str, seed: int) -> None:
    share = "0" if mix == "modern" else "0.5"
    args = f"--mix {mix} --nodes 24 --jobs 48 --seed {seed} --profile-share {share}"
    args += " --running-share 0.6 --power-budget-fraction 0.7"
    spec = g.spec_from_args(args.split())
    r = g.generate(spec)
    check_valid(r)
    full = sum(
        n.gpu_count * {t.name: t for t in r.cluster.gpu_types}[n.gpu_type].tdp_watts
        for n in r.cluster.nodes
    )
    assert r.cluster.power_budget_watts == pytest.approx(0.7 * full, abs=0.1)


def test_profiles_need_measured_types() -> None:
    spec = g.spec_from_args(["--mix", "modern", "--nodes", "8", "--jobs", "4"])
    with pytest.raises(g.SpecError, match=r"profile_share: .*measured profiles"):
        g.generate(spec)


def test_slice_share_makes_one_gpu_slice_jobs_on_mig_types() -> None:
    args = "--mix modern --profile-share 0 --nodes 8 --jobs 40 --slice-share 0.5 --seed 3"
    r = g.generate(g.spec_from_args(args.split()))
    check_valid(r)
    sliced = [j for j in r.jobs if j.slices.allow]
    assert len(sliced) == 20
    mig = {"A100-80GB", "H100-80GB", "H200"}  # the modern mix's types with a MIG geometry
    for j in sliced:
        assert (j.min_gpus, j.max_gpus) == (1, 1) and set(j.allowed_gpu_types) == mig
        assert j.model.parameters <= 1.5e9 and j.name.endswith("-slice")
    without = g.generate(g.spec_from_args(args.replace("0.5", "0").split()))
    assert not any(j.slices.allow for j in without.jobs)
    assert g.to_json(without) == g.to_json(g.generate(g.spec_from_args(
        shlex.split("--mix modern --profile-share 0 --nodes 8 --jobs 40 --seed 3"))))  # fmt: skip


def test_slice_jobs_need_a_mig_type() -> None:
    spec = g.spec_from_args(shlex.split("--mix pai --nodes 8 --jobs 8 --slice-share 0.5"))
    with pytest.raises(ValueError, match="MIG geometry"):
        g.generate(spec)


def test_gavel_point_is_the_measured_value(medium: pb.SolveRequest) -> None:
    steps = {}
    with (ROOT / "data" / "gavel" / "isolated_throughputs.csv").open() as f:
        for row in csv.DictReader(f):
            if row["consolidated"] == "1" and row["gpu_type"] == "v100" and row["batch_size"]:
                key = (row["model"].lower(), f"bs{row['batch_size']}", int(row["num_gpus"]))
                steps[key] = float(row["steps_per_sec"]) * int(row["batch_size"])
    checked = 0
    for j in medium.jobs:
        m = re.fullmatch(r"j\d{4}-gavel-(.+)-(bs\d+)", j.name)
        if m:
            for p in j.profile.points:
                assert p.gpu_type in ("V100-16GB", "V100-32GB")
                assert p.samples_per_second == steps[(m.group(1), m.group(2), p.num_gpus)]
                checked += 1
    assert checked > 100
    # One value by hand: V100, ResNet-50, batch 64, 4 GPUs: 9.451949566394442 steps/s x 64.
    (tiny,) = [j for j in load("tiny-1node.json").jobs if j.name == "resnet-50-bs64"]
    assert tiny.profile.points[0].samples_per_second == pytest.approx(9.451949566394442 * 64)


def test_pollux_point_is_the_measured_value(pai: pb.SolveRequest) -> None:
    checked = 0
    for j in pai.jobs:
        m = re.fullmatch(r"j\d{4}-pollux-(.+)-lbs(\d+)", j.name)
        if not m:
            continue
        app, lbs = m.group(1), int(m.group(2))
        with (ROOT / "data" / "pollux" / app / "placements.csv").open() as f:
            times = {
                r["placement"]: float(r["step_time"])
                for r in csv.DictReader(f)
                if int(r["local_bsz"]) == lbs
            }
        for p in j.profile.points:
            assert p.gpu_type == "T4"
            placement = g.packed_placement(p.num_gpus, 2)
            assert p.samples_per_second == pytest.approx(lbs * p.num_gpus / times[placement])
            checked += 1
    assert checked > 0


def test_profile_points_derived_fields(medium: pb.SolveRequest) -> None:
    types = {t.name: t for t in medium.cluster.gpu_types}
    for j in medium.jobs:
        for p in j.profile.points:
            assert p.sm_clock_mhz == max(types[p.gpu_type].sm_clocks_mhz)
            assert p.watts == p.num_gpus * types[p.gpu_type].tdp_watts


def test_helpers() -> None:
    assert g.packed_placement(8, 4) == "44"
    assert g.packed_placement(6, 4) == "24"
    assert g.packed_placement(3, 4) == "3"
    assert g.packed_placement(8, 2) == "2222"
    assert g.monotone([(4, 10.0), (1, 5.0), (2, 0.0), (8, 9.0)]) == [(1, 5.0), (4, 10.0)]
    kinds = (g.NodeKind("A", 8, 1.0), g.NodeKind("B", 8, 1.0), g.NodeKind("C", 8, 2.0))
    assert g.node_counts(kinds, 10) == [3, 2, 5]
    with pytest.raises(ValueError):
        g.InstanceSpec("x", 4, 4, kinds, profile_share=1.5)


def test_checked_in_instances_are_current() -> None:
    commands = documented_commands()
    assert {"medium.json", "small.json", "pai.json"} <= set(commands)
    for name, args in commands.items():
        expected = g.to_json(g.generate(g.spec_from_args(args)))
        assert (INSTANCES / name).read_text() == expected, f"{name} is stale: regenerate it"
    for name, request in g.tiny_instances().items():
        assert (INSTANCES / f"{name}.json").read_text() == g.to_json(request), name


def test_checked_in_instances_parse_and_are_valid() -> None:
    files = sorted(INSTANCES.glob("*.json"))
    assert len(files) >= 6
    for path in files:
        check_valid(load(path.name))


def test_small_counts() -> None:
    r = load("small.json")
    assert len(r.cluster.nodes) == 16 and sum(n.gpu_count for n in r.cluster.nodes) == 128
    assert len(r.jobs) == 32


def test_tiny_instances_are_hand_checkable() -> None:
    one = load("tiny-1node.json")
    assert len(one.cluster.nodes) == 1 and one.cluster.nodes[0].gpu_count == 8
    assert [(j.min_gpus, j.max_gpus, j.weight) for j in one.jobs] == [
        (4, 4, 2.0),
        (4, 4, 2.0),
        (8, 8, 1.0),
    ]
    power = load("tiny-power.json")
    tdp = power.cluster.gpu_types[0].tdp_watts
    assert power.cluster.power_budget_watts < 8 * tdp
    assert power.jobs[0].min_gpus == 8
    migration = load("tiny-migration.json")
    running = [j for j in migration.jobs if j.HasField("current_allocation")]
    assert len(running) == 1


def test_cli_writes_file(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    assert g.main(["--nodes", "4", "--jobs", "6", "--seed", "3", "--out", str(out)]) == 0
    check_valid(json_format.Parse(out.read_text(), pb.SolveRequest()))


BAD_OPTIONS = [
    ("--profile-share 1.5", "--profile-share: must be a share in [0, 1], got 1.5"),
    ("--running-share nan", "--running-share: must be a share in [0, 1], got nan"),
    ("--power-budget-fraction 0", "--power-budget-fraction: must be a fraction in (0, 1]"),
    ("--nodes 0", "--nodes: must be from 1 to 20,000 (max_nodes), got 0"),
    # ran out of memory building it; no server takes it
    ("--nodes 100000000", "--nodes: must be from 1 to 20,000 (max_nodes), got 100000000"),
    ("--jobs 10000000", "--jobs: must be from 0 to 20,000 (max_jobs), got 10000000"),
    ("--seed -5", "--seed: must be >= 0, got -5"),
    ("--time-budget inf", "--time-budget: must be finite and > 0, got inf"),
    ("--tight-rack-share 0.5", "--rack-power-budget-fraction: needed where a share of the racks"),
    ("--mix modern", "--profile-share: 0.5 asks for jobs with measured profiles"),
    ("--mix pai --slice-share 0.5", "--slice-share: slice jobs need a GPU type with a MIG"),
    ("--unavailable-share 1 --profile-share 0", "--unavailable-share: 1.0 leaves no GPU"),
]


@pytest.mark.parametrize(("args", "message"), BAD_OPTIONS)
def test_cli_names_the_option_at_fault(
    args: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.json"
    code = g.main(["--nodes", "4", "--jobs", "6", *args.split(), "--out", str(out)])
    err = capsys.readouterr().err
    assert (code, err.count("\n")) == (2, 1)
    assert err.startswith(f"dsfro generate: error: {message}")
    assert not out.exists()


def test_cli_jobs_zero_is_an_empty_instance_not_the_default(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    assert g.main(["--nodes", "4", "--jobs", "0", "--out", str(out)]) == 0
    request = json_format.Parse(out.read_text(), pb.SolveRequest())
    assert (len(request.cluster.nodes), len(request.jobs)) == (4, 0)


# ---------------------------------------------------------------- hetero-power


def hetero_power(nodes: int, seed: int, *extra: str) -> pb.SolveRequest:
    return g.generate(
        g.spec_from_args(["--family", f"hetero-power-{nodes}", "--seed", str(seed), *extra])
    )


def gpu_watts(r: pb.SolveRequest, field: str) -> dict[str, float]:
    """Per rack, every GPU at its type's `field` (tdp_watts or idle_watts)."""
    types = {t.name: t for t in r.cluster.gpu_types}
    out: dict[str, float] = {}
    for n in r.cluster.nodes:
        out[n.rack] = out.get(n.rack, 0.0) + n.gpu_count * getattr(types[n.gpu_type], field)
    return out


@pytest.mark.parametrize(("nodes", "seed"), [(32, 1), (64, 2), (128, 3)])
def test_hetero_power_family_shape(nodes: int, seed: int) -> None:
    r = hetero_power(nodes, seed)
    check_valid(r)
    per_node = {(n.gpu_type, n.gpu_count) for n in r.cluster.nodes}
    assert per_node == {("V100-16GB", 8), ("P100-16GB", 4), ("K80", 4), ("T4", 4), ("A10", 4)}
    assert len(r.cluster.nodes) == nodes and len(r.jobs) == nodes * 3 // 2
    assert any(n.unavailable_gpu_indices for n in r.cluster.nodes)
    profiles = [j for j in r.jobs if j.HasField("profile")]
    assert len(profiles) == round(0.75 * len(r.jobs))
    assert any(j.name.split("-")[1] == "gavel" for j in profiles)
    assert any({p.gpu_type for p in j.profile.points} >= {"V100-16GB", "K80"} for j in profiles)
    assert any(j.HasField("model") for j in r.jobs)
    assert any(j.HasField("current_allocation") for j in r.jobs)
    assert any(j.HasField("time_to_deadline") for j in r.jobs)
    assert len({j.weight for j in r.jobs}) > 1
    # A10 runs model jobs only: no public measurement of it exists.
    assert all(p.gpu_type != "A10" for j in profiles for p in j.profile.points)


@pytest.mark.parametrize("nodes", [32, 64, 128, 256])
def test_hetero_power_budgets(nodes: int) -> None:
    r = hetero_power(nodes, 1)
    peak, idle = gpu_watts(r, "tdp_watts"), gpu_watts(r, "idle_watts")
    budget = r.cluster.power_budget_watts
    assert sum(idle.values()) < budget < sum(peak.values())
    assert budget == pytest.approx(0.45 * sum(peak.values()), abs=0.1)
    racks = {b.rack: b.watts for b in r.cluster.rack_power_budgets}
    assert set(racks) == set(peak)
    fractions = {rack: round(w / peak[rack], 3) for rack, w in racks.items()}
    assert set(fractions.values()) == {0.4, 0.7}
    tight = [rack for rack, f in fractions.items() if f == 0.4]
    assert len(tight) == max(1, round(0.25 * len(racks)))
    assert all(idle[rack] < racks[rack] for rack in racks)


def test_hetero_power_deterministic_by_seed() -> None:
    assert g.to_json(hetero_power(32, 4)) == g.to_json(hetero_power(32, 4))
    texts = {g.to_json(hetero_power(32, seed)) for seed in (1, 2, 3)}
    assert len(texts) == 3


def test_hetero_power_options_override_the_family() -> None:
    spec = g.spec_from_args(["--family", "hetero-power-64", "--power-budget-fraction", "0.6"])
    assert (spec.num_nodes, spec.num_jobs, spec.power_budget_fraction) == (64, 96, 0.6)
    assert spec.node_kinds == g.HETERO_POWER_KINDS and spec.profile_share == 0.75
    plain = g.spec_from_args(["--nodes", "32", "--jobs", "48"])
    assert plain.rack_power_budget_fraction is None and plain.tight_rack_share == 0.0


def test_hetero_power_budget_binds_while_gpus_stay_free() -> None:
    """Solved, the plan draws the cluster budget while a third of the GPUs stay unused (the
    power margin off: with it, plans stay below the budget by design)."""
    from solver.app.convert import problem_from_proto
    from solver.app.limits import Limits
    from solver.core.settings import SolverSettings
    from solver.scoring.checker import PlanView, check_plan, rack_watts

    problem = problem_from_proto(hetero_power(32, 1, "--time-budget", "2"), Limits())
    result = solve(problem, settings=SolverSettings(power_margin_z=0.0))
    assert check_plan(problem, result.plan.assignments) == []
    view = PlanView(problem, result.plan.assignments)
    budget = problem.cluster.power_budget_watts
    assert budget is not None
    assert sum(rack_watts(view).values()) >= 0.99 * budget
    available = sum(n.available_gpus for n in problem.cluster.nodes)
    assert len(view.used) <= 2 / 3 * available
