"""Input validation of solve requests and caller-made plans, before anything is solved.

Every problem is collected (not just the first) with the path of the offending field in the
protobuf field-name form used by google.rpc.BadRequest, e.g. ``jobs[3].max_gpus``. Paths are
relative to the SolveRequest; plan paths start with ``plan.``. Validation guarantees what the
converters and solvers assume (names resolve, numbers are finite and in range); whether a plan
fits the cluster is not validation but the plan checker's job.
"""

from solver.app.validation.common import FieldViolation, duration_seconds
from solver.app.validation.plan import validate_plan
from solver.app.validation.request import validate_request

__all__ = ["FieldViolation", "duration_seconds", "validate_plan", "validate_request"]
