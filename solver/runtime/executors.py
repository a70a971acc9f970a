"""The executor a caller gets: Ray when an address is given, else a local process pool; made
on first use and kept, so that holding one costs nothing until a solve decomposes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from solver.runtime.pools import Executor, LocalExecutor, Stop

T = TypeVar("T")
R = TypeVar("R")

RAY_ADDRESS_ENV = "DSFRO_RAY_ADDRESS"


def make_executor(ray_address: str | None = None, workers: int | None = None) -> Executor:
    """Ray when an address is given (argument, else $DSFRO_RAY_ADDRESS), else local processes."""
    address = ray_address or os.environ.get(RAY_ADDRESS_ENV) or None
    if address:
        from solver.runtime.ray import RayExecutor  # Ray is an extra: imported only if asked

        return RayExecutor(address)
    return LocalExecutor(workers)


class LazyExecutor:
    """The executor make_executor gives, made on first use and then kept: a server or a
    command holds one without starting a pool or joining Ray until a solve decomposes."""

    def __init__(self, ray_address: str | None = None, workers: int | None = None) -> None:
        self._ray_address = ray_address
        self._workers = workers
        self._inner: Executor | None = None
        self._lock = threading.Lock()

    def _get(self) -> Executor:
        with self._lock:
            if self._inner is None:
                self._inner = make_executor(self._ray_address, self._workers)
            return self._inner

    @property
    def name(self) -> str:
        return self._get().name

    @property
    def workers(self) -> int:
        return self._get().workers

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        return self._get().map(fn, items, stop, retries)

    def close(self) -> None:
        with self._lock:
            inner, self._inner = self._inner, None
        if inner is not None:
            inner.close()


__all__ = ["RAY_ADDRESS_ENV", "LazyExecutor", "make_executor"]
