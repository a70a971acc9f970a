"""Optional dependencies, installed as extras of the ``dsfro`` package.

- ``server``: the solver (OR-Tools, HiGHS, Pyomo, numpy) and the service around it; without it
  the package is the client (``solver.client``, ``solver.wire``, ``dsfro solve --server``,
  ``dsfro health``), which needs only gRPC and protobuf;
- ``ray``: decomposed solves on a Ray cluster (``--ray-address``); local processes need nothing;
- ``plot``: matplotlib, for the figures of ``dsfro report``, ``sweep`` and ``calibrate``.

The service and ``dsfro solve`` import neither; the code that needs one imports it where it is
used and turns an ImportError into MissingExtraError, whose message names the extra to install.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EXTRAS = {"ray": "ray", "plot": "matplotlib"}
"""Extra -> the module it brings."""


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message says which extra brings it."""

    def __init__(self, extra: str, what: str) -> None:
        module = EXTRAS[extra]
        super().__init__(
            f"{what} needs {module}, which is not installed: pip install 'dsfro[{extra}]'",
            name=module,
        )
        self.extra = extra


SERVER_MODULES = frozenset(
    {
        "numpy",
        "ortools",
        "highspy",
        "pyomo",
        "tqdm",
        "prometheus_client",
        "pythonjsonlogger",
        "pydantic",
        "pydantic_settings",
        "grpc_reflection",
    }
)
"""The modules the ``server`` extra brings (tests/test_install.py checks them against
pyproject.toml)."""


class MissingServerError(ImportError):
    """The solver is needed here but this is the client install; the message says what to
    install, and how to use a running service instead."""

    def __init__(self, what: str, module: str, *, remote: bool = False) -> None:
        """`remote`: the command can send its request to a service instead (``--server``)."""
        alternative = (
            ", or send the request to a running service with --server HOST:PORT" if remote else ""
        )
        super().__init__(
            f"{what} needs the solver, which this install lacks ({module} is not installed): "
            f"pip install 'dsfro[server]'{alternative}",
            name=module,
        )


def server_module_missing(error: ModuleNotFoundError) -> str | None:
    """The missing module if `error` is that of a server dependency, else None."""
    top = (error.name or "").partition(".")[0]
    return top if top in SERVER_MODULES else None


def available(extra: str) -> bool:
    """Whether the extra's module can be imported (without importing it)."""
    return find_spec(EXTRAS[extra]) is not None


def missing(extra: str, what: str) -> str | None:
    """The error message for ``what`` if the extra is not installed, else None: commands check
    before their work rather than fail at its end."""
    return None if available(extra) else str(MissingExtraError(extra, what))


def new_figure(width: float, height: float) -> Figure:
    """A matplotlib Figure (inches, constrained layout) on the Agg canvas: no display needed."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise MissingExtraError("plot", "drawing figures") from e
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig
