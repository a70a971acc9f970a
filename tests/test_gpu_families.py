"""A site's own names for GPU types: the family a name belongs to (solver.perfmodel.families),
the efficiency and MIG geometry it gets from the catalog by it."""

from __future__ import annotations

import dataclasses

import pytest

from solver.perfmodel.families import family_of
from solver.perfmodel.mig_catalog import geometry_for, load_mig_catalog
from solver.perfmodel.throughput import (
    DEFAULT_COMPUTE_EFFICIENCY,
    compute_efficiency,
    load_calibration,
)
from tests.factories import A100

FAMILIES = ("A10", "A100", "H100", "H200", "T4", "K80", "V100", "L40S")


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("A100-80GB", "A100"),  # the catalog's own names
        ("H200", "H200"),
        ("NVIDIA-A100-SXM4-80GB", "A100"),  # Kubernetes GPU feature discovery
        ("NVIDIA-H100-80GB-HBM3", "H100"),
        ("Tesla-V100-SXM2-16GB", "V100"),
        ("a100", "A100"),  # a Slurm GRES type
        ("h100sxm", "H100"),
        ("A100X", "A100"),
        ("A10G", "A10"),
        ("Tesla-T4", "T4"),
        ("T400", None),  # another GPU, not a T4
        ("GH200", None),  # not an H200
        ("RTX-4090", None),
        ("", None),
    ],
)
def test_the_family_of_a_name(name: str, family: str | None) -> None:
    assert family_of(name, FAMILIES) == family


def test_efficiency_by_family_whatever_the_name() -> None:
    """Before families were tokens, the Kubernetes name fell to the default 0.30 and "T400"
    took the T4's fitted efficiency."""
    cal = load_calibration()
    a100 = compute_efficiency(A100, cal)
    assert a100 != DEFAULT_COMPUTE_EFFICIENCY
    site = dataclasses.replace(A100, name="NVIDIA-A100-SXM4-80GB")
    assert compute_efficiency(site, cal) == a100
    t4 = dataclasses.replace(A100, name="Tesla-T4")
    assert compute_efficiency(t4, cal) == cal.compute_efficiency["T4"]
    t400 = dataclasses.replace(A100, name="T400")
    assert compute_efficiency(t400, cal) == DEFAULT_COMPUTE_EFFICIENCY


@pytest.mark.parametrize(
    ("name", "memory_gib", "catalog"),
    [
        ("A100-80GB", 80, "A100-80GB"),
        ("NVIDIA-A100-SXM4-80GB", 80, "A100-80GB"),
        ("NVIDIA-A100-PCIE-40GB", 40, "A100-40GB"),
        ("a100", 79.2, "A100-80GB"),  # usable memory a little under the nominal
        ("NVIDIA-H100-80GB-HBM3", 80, "H100-80GB"),
        ("NVIDIA-H200", 141, "H200"),
        ("NVIDIA-H100-NVL", 94, None),  # its profiles differ from the 80 GB H100's
        ("A100", 60, None),  # neither A100
        ("GH200", 96, None),
        ("NVIDIA-A10", 24, None),  # no MIG
    ],
)
def test_a_catalog_geometry_by_family_and_memory(
    name: str, memory_gib: float, catalog: str | None
) -> None:
    g = geometry_for(name, memory_gib)
    if catalog is None:
        assert g is None
        return
    assert g is not None and g.gpu_type == name
    assert g.profiles == load_mig_catalog()[catalog].profiles
