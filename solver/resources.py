"""The data files the product reads, found with ``importlib.resources``.

- ``models/``: the GPU and model catalogs and the fitted constants the service needs
  (``solver.perfmodel.catalog`` reads them; ``DSFRO_MODELS_DIR`` overrides the folder there);
- ``data/``: the measurements that ``dsfro generate`` and ``dsfro calibrate`` read.

Both folders stay at the repository's top level, the single source of truth. The package reaches
them through ``solver/_bundled/models`` and ``solver/_bundled/data``, symlinks committed to git
(``../../models``, ``../../data``): a checkout or an editable install reads the repository's
files, and a wheel or sdist carries real copies (package data in pyproject.toml).

Nothing here writes. Writers (``dsfro calibrate``) take their targets from their flags or from
``source_checkout()``, never from an installed package.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

_BUNDLED = "_bundled"


class ResourceError(FileNotFoundError):
    """A bundled data file is missing or cannot be reached as a file."""


@cache
def bundled_dir(name: str) -> Path:
    """The bundled folder ``name`` (``models`` or ``data``), symlinks resolved (found once per
    process: the model reads it on every power estimate)."""
    folder = files("solver").joinpath(_BUNDLED, name)
    if not isinstance(folder, Path):  # e.g. imported from a zip: the readers need real files
        raise ResourceError(f"{folder}: dsfro must be installed unpacked to read its {name}/")
    return folder.resolve()


def models_dir() -> Path:
    """The bundled ``models/`` (the repository's in a checkout)."""
    return bundled_dir("models")


def data_dir() -> Path:
    """The bundled ``data/`` (the repository's in a checkout)."""
    return bundled_dir("data")


def source_checkout() -> Path | None:
    """The repository this package runs from, or None when it is installed (e.g. a wheel)."""
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "models").is_dir():
        return root
    return None
