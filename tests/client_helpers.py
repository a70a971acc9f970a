"""Helpers of the client tests (tests/test_client_*.py): a bearer token, retries that don't slow
the tests down, and the jobs of make_request() that a solved plan holds."""

from __future__ import annotations

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.client import RetryPolicy
from tests.factories import make_request

TOKEN = "s3cr3t-token-for-tests-0001"
FAST = RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.02)
"""Retries that don't slow the tests down."""


def solved_jobs(response: pb.SolveResponse) -> list[str]:
    return sorted(a.job for a in response.plan.assignments)


JOBS = sorted(j.name for j in make_request().jobs)
