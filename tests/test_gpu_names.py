"""scripts.common.gpu_names: a generated MIG snapshot under the names sites give GPU types stays
valid, and its types keep their geometries (from the catalog by family, or on the wire)."""

from __future__ import annotations

import pytest

from scripts.common.gpu_names import KUBERNETES, as_sites_name
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert_mig import geometries
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.offline.generate import generate, spec_from_args
from solver.perfmodel.mig_catalog import load_mig_catalog

ARGS = "--nodes 16 --jobs 48 --seed 3 --mix hybrid --running-share 0.5 --slice-share 0.5"


def snapshot() -> pb.SolveRequest:
    return generate(spec_from_args(ARGS.split()))


@pytest.mark.parametrize("mode", ["kubernetes", "own"])
def test_renamed_snapshots_stay_valid_with_their_geometries(mode: str) -> None:
    before = snapshot()
    request = snapshot()
    as_sites_name(request, mode)
    assert validate_request(request, Limits()) == []
    old = [t.name for t in before.cluster.gpu_types]
    new = [t.name for t in request.cluster.gpu_types]
    assert not set(old) & set(new)
    if mode == "kubernetes":
        assert new == [KUBERNETES[name] for name in old]
    mine, theirs = geometries(request), geometries(before)
    catalog = load_mig_catalog()
    assert {new[old.index(name)] for name in theirs} == set(mine)
    for name, g in theirs.items():
        assert mine[new[old.index(name)]].profiles == catalog[name].profiles == g.profiles
    used = {j.current_allocation.gpu_type for j in request.jobs if j.HasField("current_allocation")}
    assert used and used <= set(new)
