"""A typed Python client of the DSFRO service, for schedulers.

    from solver.client import Client, TlsConfig

    with Client("dsfro.example:50051", tls=TlsConfig(ca_file="ca.pem"), token_file="token") as c:
        plan = c.solve(request).plan

It imports only gRPC, protobuf and the generated stubs, never the solver itself, so a scheduler
can use it without the solver's numerical dependencies.
"""

from solver.client.client import (
    DEFAULT_TIME_BUDGET_SECONDS,
    HEALTH_TIMEOUT_SECONDS,
    MAX_MESSAGE_BYTES,
    REQUEST_ID_KEY,
    TRANSFER_ALLOWANCE_SECONDS,
    Client,
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
    "RetryPolicy",
    "TlsConfig",
    "Unauthenticated",
    "Unavailable",
    "default_solve_timeout",
]
