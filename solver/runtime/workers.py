"""Kept worker interpreters that run one call at a time: stopped on request, killed at a limit.

A worker is a fresh interpreter (``python -m solver.runtime.workers``), not a fork: forking a
process with gRPC and solver threads is unsafe, and multiprocessing's spawn re-runs the
caller's main module. It imports what it is told to preload, then runs calls: a picklable
top-level function and its argument, ``fn(arg, call)``, where ``call.stop`` is set when the
caller asks it to stop and ``call.report(obj)`` sends a message back before the result.

Three pipes per worker, with length-prefixed pickles (the solvers print on standard output):
calls in, messages out, and a control pipe on which the parent asks the running call to stop.
A worker started by a process that is not itself a worker leads a process group of its own,
so that killing it kills whatever it started (an isolated full model, a local pool). A worker
whose parent dies sees its control pipe close and exits.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from solver.runtime import collector, memory

log = logging.getLogger(__name__)

IN_WORKER_ENV = "DSFRO_IN_WORKER"
"""Set in every worker's environment: its own workers stay in its process group."""
READY_SECONDS = 60.0
"""Longest a new worker may take to import its preload before it is given up on."""
POLL_SECONDS = 0.02
"""How often a waiting caller looks at its stop request, its limit and the worker's memory."""
_HEADER = struct.Struct(">Q")
_STOP = struct.Struct(">cQ")


class WorkerLost(RuntimeError):
    """A worker died, or was killed, before its call answered; the reason is the message.
    `crash` is False when it was killed on purpose (past its limit, or deaf to a stop); `task`
    is the index, in its map, of the task that was running (None outside a map). `retry`:
    whether the call may run again on another worker (it died by itself or was killed from
    outside; not when it was killed here, past its time or over its memory)."""

    def __init__(
        self, message: str, *, crash: bool = True, task: int | None = None, retry: bool = True
    ) -> None:
        super().__init__(message)
        self.crash = crash
        self.task = task
        self.retry = retry and crash


class CallFailed(RuntimeError):
    """The call raised in the worker; the message has the exception and its traceback."""


def in_worker() -> bool:
    """Whether this process is a worker started by this module."""
    return os.environ.get(IN_WORKER_ENV) == "1"


# ---------------------------------------------------------------- framing


def _write(fd: int, obj: object, deadline: float | None = None) -> None:
    """Write `obj` framed; with `deadline` (time.monotonic()) on a non-blocking `fd`,
    TimeoutError once it passes with the message not all written."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError from None
            select.select([], [fd], [], left)


def _read_exactly(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("worker pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read(fd: int) -> Any:
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    return pickle.loads(_read_exactly(fd, size))


# ---------------------------------------------------------------- the parent's side


@dataclass(frozen=True)
class Report:
    """A message the call sent before its result (``call.report``)."""

    value: Any


class Worker:
    """One worker process and the parent's ends of its pipes."""

    def __init__(self, preload: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        """`env`: variables set in the worker's environment (thread caps, say)."""
        task_r, self._task_w = os.pipe()
        self._result_r, result_w = os.pipe()
        control_r, self._control_w = os.pipe()
        environ = {**os.environ, **(env or {})}
        environ[IN_WORKER_ENV] = "1"
        # The caller's import path, so that a call's function (a test's fake among them)
        # unpickles in the worker as it was pickled here.
        paths = [p for p in sys.path if p] + [environ.get("PYTHONPATH", "")]
        environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        limit = memory.worker_memory_limit()
        if limit is not None:
            environ[memory.LIMIT_ENV] = str(limit)
        self.own_group = not in_worker()
        argv = [sys.executable, "-m", __name__, str(task_r), str(result_w), str(control_r)]
        self.proc = subprocess.Popen(
            [*argv, *preload],
            pass_fds=(task_r, result_w, control_r),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=environ,
            start_new_session=self.own_group,
        )
        for fd in (task_r, result_w, control_r):
            os.close(fd)
        # A call's task larger than the pipe's buffer waits for the worker to read it (a
        # worker still importing its preload, stopped, or wedged): written without blocking,
        # so that the call's limit holds from the start (send's `deadline`).
        os.set_blocking(self._task_w, False)
        self._close_lock = threading.Lock()
        self._calls = 0
        self.ready = False
        """Set once the worker has imported its preload and said so."""

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the worker has started (its preload done); False after `timeout`."""
        end = time.monotonic() + timeout
        while not self.ready:
            left = end - time.monotonic()
            if left <= 0:
                return False
            if self.receive(left) is not None:  # only "ready" can come before a call
                continue
        return True

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def usable(self) -> bool:
        """Alive and not stopped by a signal (``stopped``): a stopped worker never takes its call,
        which then waited its whole budget for a fallback (every worker SIGSTOPped from outside:
        the next call, handed a stopped warm one, answered the server's quick plan at 2.13 s of
        2 s)."""
        return self.alive() and not stopped(self.pid)

    def send(
        self, fn: Callable[[Any, CallContext], Any], arg: Any, deadline: float | None = None
    ) -> None:
        """Start a call: WorkerLost if the worker is gone, or has not taken the whole call by
        `deadline` (time.monotonic(); a task of 0.4 MB waited 0.3 s for a worker still
        importing, past a 0.12 s limit). Either way the worker is no longer usable."""
        self._calls += 1
        try:
            limit = deadline if deadline is not None and math.isfinite(deadline) else None
            _write(self._task_w, (self._calls, fn, arg), limit)
        except TimeoutError:
            raise WorkerLost(
                f"the worker process {self.pid} did not take its call within its limit",
                crash=False,
            ) from None
        except OSError as e:
            raise WorkerLost(self._death(f"could not send the call: {e}")) from e

    def stop(self) -> None:
        """Ask the running call to stop (it answers with what it has)."""
        with contextlib.suppress(OSError):
            os.write(self._control_w, _STOP.pack(b"s", self._calls))

    def receive(self, timeout: float) -> Report | tuple[str, Any] | None:
        """The worker's next message within `timeout` seconds: a Report, or ("result", value)
        or ("error", text); None if none came. WorkerLost if the worker died."""
        try:
            ready, _, _ = select.select([self._result_r], [], [], max(timeout, 0.0))
            if not ready:
                return None
            kind, value = _read(self._result_r)
        except (EOFError, OSError, ValueError) as e:  # ValueError: closed here (fd -1)
            raise WorkerLost(self._death(str(e))) from e
        if kind == "ready":
            self.ready = True
            return self.receive(0.0) if select.select([self._result_r], [], [], 0)[0] else None
        if kind == "report":
            call_id, value = value
            # A report an earlier call's thread sent after that call's result: not this call's.
            return Report(value) if call_id == self._calls else None
        return (kind, value)

    def _death(self, what: str) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=0.5)
        code = self.proc.returncode
        if code is not None and code < 0:
            return f"the worker process {self.pid} was killed by {signal.Signals(-code).name}"
        return f"the worker process {self.pid} died (exit code {code}): {what}"

    def kill(self) -> None:
        """Kill the worker and everything it started."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if self.own_group:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                else:
                    self.proc.kill()
        self.close()

    def close(self) -> None:
        """Release the pipes (a live worker sees them close and exits). Once only: a second
        close of the same numbers would close whatever another thread has opened under them
        since (a new worker's pipe, which its process then finds closed: EBADF)."""
        with self._close_lock:
            fds = (self._task_w, self._control_w, self._result_r)
            self._task_w = self._control_w = self._result_r = -1  # os calls on them now fail
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.alive():
            try:
                self.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            self.proc.wait()


def run_call(
    worker: Worker,
    fn: Callable[[Any, CallContext], Any],
    arg: Any,
    *,
    kill_at: Callable[[], float],
    stop: Callable[[], bool] | None = None,
    stop_grace: float = 1.0,
    on_report: Callable[[Any], None] | None = None,
) -> Any:
    """The call's result. On the way: reports go to `on_report`; once `stop()` is true the
    worker is asked to stop and has `stop_grace` seconds to answer; a worker still running at
    `kill_at()` (a time.monotonic() instant, read at each poll: a report may move it), or over
    its memory limit, is killed. WorkerLost (the worker is gone: do not give it back) or
    CallFailed (the call raised: the worker is fine) otherwise."""
    try:
        worker.send(fn, arg, deadline=kill_at())
    except WorkerLost:
        worker.kill()
        raise
    stop_sent: float | None = None
    while True:
        now = time.monotonic()
        limit = kill_at()
        if stop_sent is None and stop is not None and stop():
            worker.stop()
            stop_sent = now
        if stop_sent is not None:
            limit = min(limit, stop_sent + stop_grace)
        reason = memory.kill_if_over_limit(worker.pid)
        if reason is not None:
            worker.kill()
            raise WorkerLost(reason, retry=False)
        if stopped(worker.pid):  # from outside: lost at once, not at its limit
            worker.kill()
            raise WorkerLost(f"the worker process {worker.pid} was stopped and was killed")
        if now >= limit:
            worker.kill()
            why = "did not stop when asked" if stop_sent is not None else "ran past its limit"
            raise WorkerLost(f"the worker process {worker.pid} {why} and was killed", crash=False)
        message = worker.receive(min(POLL_SECONDS, limit - now))
        if message is None:
            continue
        if isinstance(message, Report):
            if on_report is not None:
                on_report(message.value)
            continue
        kind, value = message
        if kind == "error":
            raise CallFailed(value)
        return value


def stopped(pid: int) -> bool:
    """Whether process `pid` is stopped by a signal (SIGSTOP, SIGTSTP: its state in /proc is
    T); not a tracer's stop (t: a debugger at a breakpoint, a profiler pausing it for a sample,
    which an operator means to end). False where there is no /proc (not Linux) or the process
    is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    name_end = stat.rfind(b")")  # the state follows "pid (name) "
    return stat[name_end + 2 : name_end + 3] == b"T"


# ---------------------------------------------------------------- the worker's side


class CallContext:
    """What a running call gets besides its argument."""

    def __init__(self, stop: threading.Event, report: Callable[[Any], None]) -> None:
        self.stop = stop
        """Set once the parent asks this call to stop."""
        self.report = report
        """Send a message to the parent before the result (pickled)."""


def _serve(task_fd: int, result_fd: int, control_fd: int, preload: Sequence[str]) -> None:
    for name in preload:  # a module, or module:function to call once imported
        module, _, function = name.partition(":")
        loaded = importlib.import_module(module)
        if function:
            getattr(loaded, function)()
    stop = threading.Event()
    current = [0]
    write_lock = threading.Lock()

    def control() -> None:
        while True:
            try:
                data = _read_exactly(control_fd, _STOP.size)
            except (EOFError, OSError):
                os._exit(0)  # the parent is gone: so is every call's purpose
            _, call_id = _STOP.unpack(data)
            if call_id == current[0]:
                stop.set()

    def send(kind: str, value: Any) -> None:
        with write_lock:
            _write(result_fd, (kind, value))

    threading.Thread(target=control, name="dsfro-worker-control", daemon=True).start()
    collector.freeze_imports()  # before it says it is ready: never on a call's clock
    try:
        send("ready", None)
    except OSError:  # the parent went away while this worker started
        return
    while True:
        try:
            call_id, fn, arg = _read(task_fd)
        except EOFError:
            return
        stop.clear()
        current[0] = call_id
        try:
            context = CallContext(stop, _reporter(send, call_id))
            with collector.collector_paused():
                result: tuple[str, Any] = ("result", fn(arg, context))
        except BaseException as e:  # reported to the parent, which decides what it means
            result = ("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        try:
            send(*result)
        except BrokenPipeError:
            return
        except Exception as e:  # an answer that does not pickle
            send("error", f"the call's answer could not be sent: {type(e).__name__}: {e}")
        collector.collect_between_calls()


def _reporter(send: Callable[[str, Any], None], call_id: int) -> Callable[[Any], None]:
    """Reports stamped with their call: a thread of a call may still report after it ended."""

    def report(value: Any) -> None:
        send("report", (call_id, value))

    return report


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
