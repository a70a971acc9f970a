"""The demand convention (``--comment='dsfro:{...}'``) and the site file: what they accept,
and errors that name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.slurm.demand import DemandError, parse_demand
from solver.slurm.site import Site, SiteError, load_site, site_from_dict

SITE = Site()


def test_a_comment_without_the_prefix_is_no_demand() -> None:
    assert parse_demand("", SITE) is None
    assert parse_demand("nightly run; owner alice", SITE) is None


def test_a_full_demand_in_both_spellings() -> None:
    text = (
        'dsfro:{"model":"gpt3-1.3b","minGpus":2,"max_gpus":8,"weight":2.5,"tenant":"nlp",'
        '"allowedGpuTypes":["h100","A100-80GB"],"remaining_samples":1e6,"deadline":"90m",'
        '"preemptible":false}'
    )
    d = parse_demand(text, SITE)
    assert d is not None
    assert d.workload == "model" and d.spec["hidden_size"] == 2048  # from the catalog
    assert (d.min_gpus, d.max_gpus, d.weight, d.tenant) == (2, 8, 2.5, "nlp")
    assert d.allowed_gpu_types == ("H100-80GB", "A100-80GB")
    assert d.remaining_samples == 1e6 and d.deadline_seconds == 5400.0
    assert d.preemptible is False


def test_an_inline_model_and_a_profile() -> None:
    spec = {
        "parameters": 1e9,
        "layers": 16,
        "hiddenSize": 2048,
        "attentionHeads": 16,
        "sequenceLength": 2048,
        "globalBatchSize": 256,
    }
    d = parse_demand("dsfro:" + json.dumps({"model": spec}), SITE)
    assert d is not None and d.spec == spec
    profile = {
        "points": [
            {
                "gpuType": "H100-80GB",
                "numGpus": 1,
                "tensorParallel": 1,
                "pipelineParallel": 1,
                "smClockMhz": 1785,
                "samplesPerSecond": 10,
                "watts": 600,
            }
        ]
    }
    d = parse_demand("dsfro:" + json.dumps({"profile": profile}), SITE)
    assert d is not None and d.workload == "profile"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"model": "gpt3-1.3b"', "comment: malformed JSON after 'dsfro:'"),
        ("[1, 2]", "comment: expected a JSON object"),
        ("{}", "comment: model: give exactly one of model"),
        ('{"model": "gpt-9"}', 'comment: model: unknown model "gpt-9" \\(known: bert-large'),
        ('{"model": {"layers": "many"}}', "comment: model: not a valid ModelSpec"),
        (
            '{"model": "gpt3-1.3b", "max_gpus": "eight"}',
            'comment: max_gpus: expected an integer from 1 to 1,000,000, got "eight"',
        ),
        (
            '{"model": "gpt3-1.3b", "minGpus": 0}',
            "comment: min_gpus: expected an integer from 1 to 1,000,000, got 0",
        ),
        # Figures out of any range are refused here, one job at a time (before, one such
        # demand made every round fail: "Value out of range", "cannot convert float infinity").
        (
            '{"model": "gpt3-1.3b", "max_gpus": 1000000000000}',
            "comment: max_gpus: expected an integer from 1 to 1,000,000, got 1000000000000",
        ),
        (
            '{"model": "gpt3-1.3b", "min_gpus": 2147483648}',
            "comment: min_gpus: expected an integer from 1 to 1,000,000",
        ),
        (
            '{"model": "gpt3-1.3b", "remaining_samples": 1, "deadline": 1e300}',
            "comment: deadline: must be > 0 and at most ten years, got 1e\\+300",
        ),
        (
            '{"model": "gpt3-1.3b", "remaining_samples": 1, "deadline": Infinity}',
            "comment: deadline: must be > 0 and at most ten years, got Infinity",
        ),
        ('{"model": "gpt3-1.3b", "weight": NaN}', "comment: weight: must be finite, got nan"),
        (
            '{"model": "gpt3-1.3b", "remaining_samples": Infinity}',
            "comment: remaining_samples: must be finite, got inf",
        ),
        (
            '{"model": "gpt3-1.3b", "deadline": "2h"}',
            "comment: deadline: needs remaining_samples > 0",
        ),
        (
            '{"model": "gpt3-1.3b", "deadline": "2h", "remaining_samples": 0}',
            "comment: deadline: needs remaining_samples > 0",
        ),
        (
            '{"model": "gpt3-1.3b", "min_gpus": 8, "max_gpus": 4}',
            "comment: max_gpus: is 4, below min_gpus 8",
        ),
        ('{"model": "gpt3-1.3b", "weight": -1}', "comment: weight: must be > 0, got -1"),
        (  # the service refused it: the job's error, not the round's
            '{"model": "gpt3-1.3b", "weight": 5000}',
            "comment: weight: must be a number from 0.001 to 1000, got 5000",
        ),
        (
            '{"model": "gpt3-1.3b", "deadline": "soon"}',
            'comment: deadline: expected seconds or a duration like "90m", got "soon"',
        ),
        (
            '{"model": "gpt3-1.3b", "allowed_gpu_types": ["b200"]}',
            'comment: allowed_gpu_types: unknown GPU type "b200"',
        ),
        (
            '{"model": "gpt3-1.3b", "preemptible": "no"}',
            'comment: preemptible: expected true or false, got "no"',
        ),
        ('{"model": "gpt3-1.3b", "gpus": 4}', "comment: gpus: unknown key \\(known: model"),
        ('{"model": "gpt3-1.3b", "maxGpus": 4, "max_gpus": 4}', "comment: max_gpus: given twice"),
    ],
)
def test_every_wrong_demand_names_its_key(body: str, message: str) -> None:
    with pytest.raises(DemandError, match=message):
        parse_demand("dsfro:" + body, SITE)


def test_the_site_file_adds_gpu_types_models_and_racks(tmp_path: Path) -> None:
    gpu = {
        "name": "X1",
        "memoryGib": 96,
        "peakTflops": 500,
        "memoryBandwidthGbps": 4000,
        "intraNodeBandwidthGbps": 900,
        "tdpWatts": 600,
        "idleWatts": 60,
        "smClocksMhz": [1500, 1800],
    }
    path = tmp_path / "site.json"
    path.write_text(
        json.dumps(
            {
                "gpu_types": {"x1": gpu, "hopper": "H100-80GB"},
                "models": {
                    "tiny": {
                        "parameters": 1e8,
                        "layers": 4,
                        "hiddenSize": 512,
                        "attentionHeads": 8,
                        "sequenceLength": 512,
                        "globalBatchSize": 64,
                    }
                },
                "racks": {"node[1-2]": "r1"},
                "base_watts": {"node[1-2]": 1100, "node3": 0},
                "power_budget_watts": 9000,
                "rack_power_budgets": {"r1": 5000},
                "weights": {"energy": 0.3},
            }
        )
    )
    site = load_site(path)
    x1, hopper = site.gpu_type("X1"), site.gpu_type("hopper")
    assert x1 is not None and x1.name == "X1"
    assert hopper is not None and hopper.name == "H100-80GB"
    assert site.gpu_type("h100") is not None  # the catalog's stay
    assert "tiny" in site.models and "gpt3-1.3b" in site.models
    assert (site.rack("node2"), site.rack("node3")) == ("r1", "rack0")
    assert site.base_watts == {"node1": 1100.0, "node2": 1100.0, "node3": 0.0}
    assert site.power_budget_watts == 9000 and site.rack_power_budgets == {"r1": 5000}
    assert site.weights is not None and site.weights.energy == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"gpu_type": {}}, r"site: unknown keys \['gpu_type'\]"),
        ({"gpu_types": {"h100": "H999"}}, r"site\.gpu_types\.h100: unknown GPU type 'H999'"),
        ({"gpu_types": {"x": {"memoryGib": "lots"}}}, r"site\.gpu_types\.x: not a valid GpuType"),
        ({"models": {"m": {"layerz": 3}}}, r"site\.models\.m: not a valid ModelSpec"),
        ({"racks": {"node[1-": "r1"}}, r"site\.racks\.node\[1-: unbalanced"),
        ({"racks": {"node1": 3}}, r"site\.racks\.node1: expected a rack name"),
        ({"base_watts": {"node1": -5}}, r"site\.base_watts\.node1: must be >= 0 W"),
        ({"base_watts": {"node1": "lots"}}, r"site\.base_watts\.node1: expected a number"),
        ({"base_watts": {"node[1-": 5}}, r"site\.base_watts\.node\[1-: unbalanced"),
        ({"power_budget_watts": 0}, r"site\.power_budget_watts: must be > 0"),
        ({"rack_power_budgets": {"r1": "x"}}, r"site\.rack_power_budgets\.r1: expected a number"),
        (
            {"racks": {"node[1-2]": "r1"}, "rack_power_budgets": {"R1": 5000}},
            r"site\.rack_power_budgets\.R1: no node is in rack 'R1' \(racks: r1\)",
        ),
        ({"weights": {"energi": 1}}, r"site\.weights: not a valid ObjectiveWeights"),
    ],
)
def test_every_wrong_site_entry_names_its_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(SiteError, match=message):
        site_from_dict(data)


def test_an_unreadable_site_file(tmp_path: Path) -> None:
    with pytest.raises(SiteError, match="cannot read"):
        load_site(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SiteError, match="malformed JSON"):
        load_site(tmp_path / "bad.json")


def test_the_guide_documents_every_key() -> None:
    """docs/integrations.md's table of the demand convention names every key parse_demand
    takes."""
    from solver.slurm.demand import KEYS

    guide = (Path(__file__).resolve().parent.parent / "docs" / "integrations.md").read_text()
    table = [line for line in guide.splitlines() if line.startswith("| `")]
    for key in KEYS:
        assert any(f"`{key}`" in line.split("|")[1] for line in table), key


def _schedule(tmp_path: Path) -> Path:
    path = tmp_path / "grid.csv"
    rows = "".join(f"2026-12-01T{h:02d}:00:00,{400 - 10 * h}\n" for h in range(24))
    path.write_text("time,carbon_g_per_kwh\n" + rows)
    return path


def test_the_site_grid_reads_its_schedule_and_options(tmp_path: Path) -> None:
    data = {"grid": {"schedule": str(_schedule(tmp_path)), "hours": 6, "saving_per_delay": 0.25}}
    grid = site_from_dict(data).grid
    assert grid is not None and len(grid.schedule) == 24 and grid.hours == 6
    assert grid.schedule[3].carbon_g_per_kwh == 370.0
    assert (grid.min_saving, grid.saving_per_delay, grid.scale_energy) == (None, 0.25, False)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"hourz": 3}, r"site\.grid: unknown keys \['hourz'\]"),
        ({}, r"site\.grid\.schedule: the path of a grid schedule CSV is required"),
        ({"hours": -1}, r"site\.grid\.hours: an integer in \[0, 720\]"),
        ({"min_saving": 1.5}, r"site\.grid\.min_saving: a number in \[0, 1\)"),
        ({"saving_per_delay": -2}, r"site\.grid\.saving_per_delay: a number in \[0, 100\]"),
        ({"scale_energy": "yes"}, r"site\.grid\.scale_energy: true or false"),
    ],
)
def test_every_wrong_grid_entry_names_its_key(
    tmp_path: Path, entry: dict[str, object], message: str
) -> None:
    data = {"grid": {"schedule": str(_schedule(tmp_path)), **entry}}
    if entry == {}:
        data = {"grid": {}}
    with pytest.raises(SiteError, match=message):
        site_from_dict(data)


def test_a_bad_schedule_names_its_row(tmp_path: Path) -> None:
    path = tmp_path / "grid.csv"
    path.write_text("time,carbon_g_per_kwh\n2026-12-01T00:00:00,10\n2026-12-01T00:00:00,20\n")
    with pytest.raises(
        SiteError, match=r"site\.grid\.schedule: .*grid\.csv:3: time .* is not after"
    ):
        site_from_dict({"grid": {"schedule": str(path)}})
