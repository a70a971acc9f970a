"""Tasks on a Ray cluster, and what went wrong when joining one, said plainly.

``ray.init`` against a cluster it cannot join retries for about 20 s and then raises a bare
``ConnectionError``; the cause (nothing listening, or a token the cluster refused) is only in
its log lines. Before joining a ``host:port`` address, the cluster's control service (GCS) is
asked once for its id: nothing answering, or an answer of UNAUTHENTICATED, becomes a
``RayConnectionError`` that names the address, the cause and the fix.

Token authentication (Ray 2.52 and later; the default for local clusters from 2.59, for all
clusters from 2.61): the head and every client set ``RAY_AUTH_MODE=token`` and give the token
in ``RAY_AUTH_TOKEN``, or in a file named by ``RAY_AUTH_TOKEN_PATH`` (``ray get-auth-token``
prints a cluster's). docs/operations.md has the set-up.

A cluster can go away under a joined process (``ray stop``, a lost head): Ray's tasks then wait
for good and, 60 s on, Ray ends the process. So each map first asks the control service again
(a few ms) and keeps asking while its tasks run; a cluster that no longer answers, or has no
live node, raises ``RayConnectionError`` at once, the process leaves the cluster in the
background, and the next map joins it again when it is back.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from solver.extras import MissingExtraError
from solver.runtime.collector import paused_collection
from solver.runtime.cores import THREAD_VARIABLES
from solver.runtime.pools import STOP_POLL_SECONDS, Stop, Stopped, WorkerLost

T = TypeVar("T")
R = TypeVar("R")

PROBE_SECONDS = 3.0
"""How long a look at a cluster's control service may take."""
LIVENESS_SECONDS = 1.0
"""How often a map whose tasks still run asks whether the cluster is still there."""
GONE = ("UNAVAILABLE", "DEADLINE_EXCEEDED")
"""Answers (gRPC codes) that mean nothing is there: a refused token is an answer."""
TOKEN_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:]+\]|[\w.-]+):(\d{1,5})$")


class RayConnectionError(ConnectionError):
    """Joining the Ray cluster failed; the message names the address, the cause and the fix."""


class _Leaving:
    """This process's leaving of a lost cluster (Ray's connection is one per process, shared
    by every executor in it): ray.shutdown() waits about 5 s for a cluster that is gone, so it
    runs in the background while the caller's fallback answers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.why = ""

    def start(self, ray: Any, why: str) -> None:
        with self._lock:
            self.why = why
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=ray.shutdown, name="ray-leave", daemon=True)
                self._thread.start()

    def running(self) -> bool:
        with self._lock:
            return self._thread is not None and self._thread.is_alive()


_LEAVING = _Leaving()


def token(environ: Mapping[str, str] | None = None) -> str | None:
    """The token this process would present: RAY_AUTH_TOKEN, else the file named by
    RAY_AUTH_TOKEN_PATH; None when token authentication is not asked for."""
    env = os.environ if environ is None else environ
    if env.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return None
    if env.get("RAY_AUTH_TOKEN", "").strip():
        return env["RAY_AUTH_TOKEN"].strip()
    path = env.get("RAY_AUTH_TOKEN_PATH", "").strip()
    if path:
        try:
            return Path(path).read_text().strip() or None
        except OSError as e:
            raise RayConnectionError(
                f"RAY_AUTH_TOKEN_PATH names {path!r}, which cannot be read ({e.strerror})"
            ) from e
    return None


def probe(address: str, environ: Mapping[str, str] | None = None, *, joining: bool = True) -> None:
    """Ask the cluster at `address` (host:port of its GCS) for its id and a live node;
    RayConnectionError if nothing answers, no node is alive or (`joining`) it refuses this
    process's token. Other addresses are not probed."""
    if _HOST_PORT.match(address) is None:
        return
    import grpc
    from ray.core.generated import gcs_pb2, gcs_service_pb2, gcs_service_pb2_grpc

    messages: Any = gcs_service_pb2
    stubs: Any = gcs_service_pb2_grpc
    nodes_pb: Any = gcs_pb2
    alive = nodes_pb.GcsNodeInfo.GcsNodeState.Value("ALIVE")
    presented = token(environ)
    metadata = [("authorization", f"Bearer {presented}")] if presented else None
    with grpc.insecure_channel(address) as channel:
        stub = stubs.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(
                messages.GetClusterIdRequest(), timeout=PROBE_SECONDS, metadata=metadata
            )
            nodes = stub.GetAllNodeInfo(
                messages.GetAllNodeInfoRequest(state_filter=alive, limit=1),
                timeout=PROBE_SECONDS,
                metadata=metadata,
            ).node_info_list
        except grpc.RpcError as e:
            code = e.code().name
            if joining or code in GONE:
                raise RayConnectionError(explain(address, code, presented is not None)) from e
            return
    if not nodes:
        raise RayConnectionError(
            f"the Ray cluster at {address} has no live node (its control service answers, "
            f"its raylets are gone): restart its nodes (`ray start`)"
        )


def explain(address: str, code: str, token_given: bool) -> str:
    """What a refused or unanswered probe of `address` means and what to do about it."""
    if code == "UNAUTHENTICATED":
        if token_given:
            return (
                f"the Ray cluster at {address} refused this service's token: RAY_AUTH_TOKEN "
                f"(or the file RAY_AUTH_TOKEN_PATH names) must hold the cluster's token "
                f"(`ray get-auth-token` on its head node prints it)"
            )
        return (
            f"the Ray cluster at {address} requires token authentication and this service "
            f"sent no token: set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, "
            f"a file holding it) in the service's environment; `ray get-auth-token` on the "
            f"head node prints the token (docs/operations.md, Ray)"
        )
    if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return (
            f"no Ray cluster answers at {address} ({code}): start its head node "
            f"(`ray start --head --port PORT`) or give the address of a running one "
            f"(--ray-address / DSFRO_RAY_ADDRESS, host:port of its GCS, 6379 by default)"
        )
    return f"the Ray cluster at {address} answered {code} to a first request"


class RayExecutor:
    """Tasks on a Ray cluster: `address` as for ray.init ("auto", "ray://host:10001",
    "host:port", or "local" to start one on this machine); one CPU per task."""

    name = "ray"

    def __init__(self, address: str) -> None:
        try:
            import ray
        except ImportError as e:
            raise MissingExtraError("ray", f"the Ray executor (address {address!r})") from e

        self._ray: Any = ray
        self._address = address
        self._gcs: str | None = None
        self._remote: dict[Callable[..., Any], Any] = {}
        self.workers = 1
        self._join()

    def _join(self) -> None:
        ray = self._ray
        given = _HOST_PORT.match(self._address) is not None
        if _LEAVING.running():
            raise RayConnectionError(f"{_LEAVING.why} (still leaving it)")
        if ray.is_initialized():  # joined before, by this process: is the cluster still there?
            self._gcs = self._address if given else _gcs_address(ray)
            self._still_there()
        else:
            if self._address != "local":
                probe(self._address)
            try:
                ray.init(
                    address=None if self._address == "local" else self._address,
                    include_dashboard=False,
                    log_to_driver=False,
                )
            except ConnectionError as e:
                hint = ""
                if token() is None:
                    hint = (
                        "; if the cluster uses token authentication, set RAY_AUTH_MODE=token "
                        "and RAY_AUTH_TOKEN in the service's environment"
                    )
                raise RayConnectionError(
                    f"could not join the Ray cluster at {self._address}: {e}{hint}"
                ) from e
            self._remote.clear()  # remote functions belong to the session they were made in
            self._gcs = self._address if given else _gcs_address(ray)
        resources: dict[str, float] = ray.cluster_resources()
        self.workers = max(int(resources.get("CPU", 1)), 1)

    def _ready(self) -> None:
        """Joined to a cluster that answers: joined again after a loss, else asked (a few ms)."""
        if _LEAVING.running() or not self._ray.is_initialized():
            self._join()
        else:
            self._still_there()

    def _still_there(self) -> None:
        """RayConnectionError, after leaving the cluster, if it stopped answering."""
        if self._gcs is None:
            return
        try:
            probe(self._gcs, joining=False)
        except RayConnectionError as e:
            why = f"lost the Ray cluster: {e}"
            _LEAVING.start(self._ray, why)
            raise RayConnectionError(why) from e

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        self._ready()
        remote = self._remote.get(fn)
        if remote is None:
            # each task as a solve runs: with the cyclic collector off (solver.runtime.collector)
            remote = self._remote[fn] = self._ray.remote(
                num_cpus=1, runtime_env={"env_vars": dict.fromkeys(THREAD_VARIABLES, "1")}
            )(paused_collection(fn))
        # Ray reruns a task whose worker died up to max_retries times (3 unless told: a
        # decomposed solve's deadline has no room for reruns, and wants its WorkerLost).
        refs = [remote.options(max_retries=retries).remote(x) for x in items]
        pending = list(refs)
        poll = STOP_POLL_SECONDS if stop is not None else LIVENESS_SECONDS
        asked = time.monotonic()
        while pending:
            if stop is not None and stop():
                for ref in refs:
                    with contextlib.suppress(Exception):
                        self._ray.cancel(ref, force=True)
                raise Stopped("stopped on request: the Ray tasks were cancelled")
            _, pending = self._ray.wait(pending, num_returns=len(pending), timeout=poll)
            if pending and time.monotonic() - asked >= LIVENESS_SECONDS:
                self._still_there()
                asked = time.monotonic()
        lost = (
            self._ray.exceptions.WorkerCrashedError,
            self._ray.exceptions.NodeDiedError,
            self._ray.exceptions.ObjectLostError,
        )
        results: list[R] = []
        for k, ref in enumerate(refs):
            try:
                results.append(self._ray.get(ref))
            except lost as e:  # the interface's WorkerLost, as the local pool raises it
                raise WorkerLost(
                    f"task {k + 1} of {len(refs)} lost its Ray worker"
                    f"{f' {retries + 1} times' if retries else ''}: {type(e).__name__}",
                    task=k,
                ) from e
        return results

    def close(self) -> None:
        """Leaves the Ray cluster running: it belongs to whoever started it."""


def _gcs_address(ray: Any) -> str | None:
    """The host:port of the joined cluster's control service; None for a Ray client
    (ray://), whose connection Ray keeps itself."""
    with contextlib.suppress(Exception):
        if not ray.util.client.ray.is_connected():
            address = ray.get_runtime_context().gcs_address
            return address if isinstance(address, str) and address else None
    return None
