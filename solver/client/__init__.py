"""A typed Python client of the DSFRO service, for schedulers.

    from solver.client import Client, TlsConfig

    with Client("dsfro.example:50051", tls=TlsConfig(ca_file="ca.pem"), token_file="token") as c:
        plan = c.solve(request).plan

``request`` is a ``solver.wire.SolveRequest``, or the same in protobuf JSON form as Python data
(``{"cluster": {...}, "jobs": [...]}``) or as text. It imports only gRPC, protobuf and the
generated stubs, never the solver itself: the client install (``pip install dsfro``, without
the ``server`` extra) is all a scheduler needs.
"""

from solver.client.client import (
    DEFAULT_TIME_BUDGET_SECONDS,
    HEALTH_TIMEOUT_SECONDS,
    MAX_MESSAGE_BYTES,
    REQUEST_ID_KEY,
    TRANSFER_ALLOWANCE_SECONDS,
    Client,
    PlanLike,
    Snapshot,
    default_solve_timeout,
)
from solver.client.errors import (
    DeadlineExceeded,
    DsfroError,
    FieldViolation,
    InvalidRequest,
    Overloaded,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from solver.client.retry import RetryPolicy
from solver.client.security import TlsConfig

__all__ = [
    "DEFAULT_TIME_BUDGET_SECONDS",
    "HEALTH_TIMEOUT_SECONDS",
    "MAX_MESSAGE_BYTES",
    "REQUEST_ID_KEY",
    "TRANSFER_ALLOWANCE_SECONDS",
    "Client",
    "DeadlineExceeded",
    "DsfroError",
    "FieldViolation",
    "InvalidRequest",
    "Overloaded",
    "PermissionDenied",
    "PlanLike",
    "RetryPolicy",
    "Snapshot",
    "TlsConfig",
    "Unauthenticated",
    "Unavailable",
    "default_solve_timeout",
]
