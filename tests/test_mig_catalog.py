"""The MIG catalog (models/mig_profiles.json) and the layouts it allows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.mig import (
    MigGeometry,
    MigInstance,
    MigProfile,
    SliceRequest,
    k8s_resource,
    layout_problems,
    slurm_gres,
    valid_layouts,
)
from solver.perfmodel.catalog import CatalogError, load_gpu_catalog
from solver.perfmodel.mig_catalog import load_mig_catalog, parse_mig_catalog

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def catalog() -> dict[str, MigGeometry]:
    return load_mig_catalog()


def test_the_four_gpu_types_of_the_issue_with_the_user_guide_names(
    catalog: dict[str, MigGeometry],
) -> None:
    assert set(catalog) == {"A100-40GB", "A100-80GB", "H100-80GB", "H200"}
    assert set(catalog) <= set(load_gpu_catalog())
    assert set(catalog["A100-40GB"].profiles) == {
        "1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb",
    }  # fmt: skip
    assert set(catalog["H200"].profiles) == {
        "1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb",
    }  # fmt: skip
    a = catalog["A100-40GB"].profiles
    assert (a["3g.20gb"].compute_slices, a["3g.20gb"].memory_slices, a["3g.20gb"].max_count) == (
        3,
        4,
        2,
    )
    assert a["1g.5gb"].starts == (0, 1, 2, 3, 4, 5, 6)
    assert a["1g.10gb"].starts == (0, 2, 4, 6) and a["1g.10gb"].memory_slices == 2
    assert a["4g.20gb"].starts == (0,) and a["7g.40gb"].memory_slices == 8
    h = catalog["H100-80GB"].profiles
    assert h["1g.10gb"].memory_gib == 10 and h["7g.80gb"].compute_slices == 7


def test_each_profile_alone_packs_to_the_tables_instance_count(
    catalog: dict[str, MigGeometry],
) -> None:
    """The user guide's "Number of Instances Available" follows from the starts and sizes
    (media-extension profiles are limited to one by the table itself)."""
    for g in catalog.values():
        for p in g.plannable():
            most = max(len(layout) for layout in valid_layouts(g, [p]))
            assert most == p.max_count, (g.gpu_type, p.name)


def test_known_layouts_and_the_ways_a_layout_cannot_exist(
    catalog: dict[str, MigGeometry],
) -> None:
    g = catalog["A100-40GB"]
    assert layout_problems(g, [MigInstance("4g.20gb", 0), MigInstance("3g.20gb", 4)]) == []
    assert layout_problems(g, [MigInstance("1g.5gb", s) for s in range(7)]) == []
    assert layout_problems(
        g, [MigInstance("3g.20gb", 4), MigInstance("2g.10gb", 0), MigInstance("1g.5gb", 2),
            MigInstance("1g.5gb", 3)]
    ) == []  # fmt: skip
    overlap = layout_problems(g, [MigInstance("3g.20gb", 0), MigInstance("2g.10gb", 2)])
    assert len(overlap) == 1 and "overlaps 3g.20gb@0 at slice 2" in overlap[0]
    bad_start = layout_problems(g, [MigInstance("2g.10gb", 1)])
    assert len(bad_start) == 1 and "cannot start at memory slice 1" in bad_start[0]
    unknown = layout_problems(g, [MigInstance("1g.10gb+me", 0)])
    assert len(unknown) == 1 and "unknown MIG profile" in unknown[0]
    twice = layout_problems(g, [MigInstance("1g.5gb+me", 0), MigInstance("1g.5gb+me", 1)])
    assert twice == ["2 instances of 1g.5gb+me exceed its maximum of 1"]
    full = {tuple(i.place for i in layout) for layout in valid_layouts(g, g.plannable())}
    assert (("4g.20gb", 0), ("3g.20gb", 4)) in full
    assert (("7g.40gb", 0),) in full
    assert not any(("7g.40gb", 0) in layout and len(layout) > 1 for layout in full)


def test_sm_slices_are_counted_on_their_own() -> None:
    """A geometry whose memory would allow more SM slices than the GPU has."""
    wide = MigProfile("2g.x", 2, 1, 1.0, 4, (0, 1, 2, 3))
    g = MigGeometry("toy", compute_slices=3, memory_slices=4, profiles={"2g.x": wide})
    assert layout_problems(g, [MigInstance("2g.x", 0), MigInstance("2g.x", 1)]) == [
        "4 SM slices exceed the GPU's 3"
    ]
    assert max(len(x) for x in valid_layouts(g)) == 1


def test_slice_request_bounds_and_scheduler_names(catalog: dict[str, MigGeometry]) -> None:
    g = catalog["H100-80GB"]
    r = SliceRequest(smallest_profile="1g.20gb", largest_profile="3g.40gb")
    allowed = [p.name for p in g.plannable() if r.allows(g, p.name)]
    assert allowed == ["1g.20gb", "2g.20gb", "3g.40gb"]
    assert not SliceRequest().allows(g, "1g.10gb+me")
    assert k8s_resource("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert slurm_gres("1g.10gb") == "gpu:1g.10gb"


def test_a_bad_catalog_entry_is_named() -> None:
    doc = json.loads((ROOT / "models" / "mig_profiles.json").read_text())
    doc["gpus"][0]["profiles"][3]["starts"] = [0, 7]
    with pytest.raises(CatalogError, match=r"entry 0 .*'2g.10gb'.*start 7 \+ 2 slices"):
        parse_mig_catalog(doc, "mig_profiles.json")
    doc = json.loads((ROOT / "models" / "mig_profiles.json").read_text())
    del doc["gpus"][1]["profiles"][0]["max_count"]
    with pytest.raises(CatalogError, match=r"entry 1 .*missing \['max_count'\]"):
        parse_mig_catalog(doc, "mig_profiles.json")
