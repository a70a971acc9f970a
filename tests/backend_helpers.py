"""Helpers of the exact-backend tests (tests/test_backends_*.py): a test per installed exact
backend, and a bundled instance with its configurations."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.domain import Problem
from solver.perfmodel.configs import ConfigSet, build_config_set
from tests.bruteforce import EXACT_BACKENDS

ROOT = Path(__file__).resolve().parent.parent

by_backend = pytest.mark.parametrize("backend", EXACT_BACKENDS, ids=lambda b: b.value)


def _instance(name: str) -> tuple[Problem, ConfigSet]:
    p = problem_from_proto(load_request_json(ROOT / "instances" / f"{name}.json"), Limits())
    return p, build_config_set(p)
