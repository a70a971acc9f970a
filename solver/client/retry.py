"""When to try a failed call again, and how long to wait first.

Two failures are worth another attempt: RESOURCE_EXHAUSTED with the server's
google.rpc.RetryInfo (its solve slots are full; it says when one is likely free) and
UNAVAILABLE (not reachable, or shutting down: another replica may answer). A
RESOURCE_EXHAUSTED without RetryInfo is a size limit, and every other code (INVALID_ARGUMENT,
UNAUTHENTICATED, PERMISSION_DENIED, INTERNAL, DEADLINE_EXCEEDED, ...) would fail the same way
again: neither is retried.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import grpc

from solver.client.errors import DsfroError, Overloaded


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts a call gets and how it backs off between them.

    UNAVAILABLE waits a uniformly random time up to ``initial_backoff * multiplier**(n-1)``
    (capped at ``max_backoff``) before attempt n+1: "full jitter", so that callers cut off
    together don't come back together. RESOURCE_EXHAUSTED waits the server's hint, stretched by
    up to ``hint_spread`` of itself for the same reason. No wait runs past the call's deadline.
    ``RetryPolicy(max_attempts=1)`` never retries.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 5.0
    multiplier: float = 2.0
    hint_spread: float = 0.2

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not 0 < self.initial_backoff <= self.max_backoff:
            raise ValueError(
                f"need 0 < initial_backoff <= max_backoff, got {self.initial_backoff} "
                f"and {self.max_backoff}"
            )
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier}")
        if self.hint_spread < 0:
            raise ValueError(f"hint_spread must be >= 0, got {self.hint_spread}")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based) was UNAVAILABLE."""
        cap = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        return rng.uniform(0.0, cap)

    def delay(self, error: DsfroError, rng: random.Random) -> float | None:
        """Seconds to wait before the next attempt after `error`, or None: don't retry (the
        error is final, or this was the last attempt)."""
        if error.attempts >= self.max_attempts:
            return None
        if isinstance(error, Overloaded) and error.retry_delay is not None:
            return error.retry_delay * (1.0 + self.hint_spread * rng.random())
        if error.code is grpc.StatusCode.UNAVAILABLE:
            return self.backoff(error.attempts, rng)
        return None


DEFAULT_RETRY = RetryPolicy()
"""Five attempts, backing off from 0.1 s up to 5 s."""
