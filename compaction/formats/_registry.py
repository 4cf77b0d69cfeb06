"""The formats of this package, found by looking: every module whose name does not start with
an underscore is an import format and defines ``FORMAT`` (a :class:`Format`). Adding a format
is adding such a module; detection, ``format=`` choices, the CLI and the upload page follow."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from ._base import Format, FormatName


def _discover() -> dict[FormatName, Format]:
    found: list[Format] = []
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        spec = getattr(module, "FORMAT", None)
        if not isinstance(spec, Format):
            raise TypeError(f"{module.__name__} is an import format module without a FORMAT")
        found.append(spec)
    found.sort(key=lambda f: (f.order, f.name))
    registry = {f.name: f for f in found}
    if len(registry) != len(found):
        raise TypeError("two import format modules share a name")
    return registry


#: Every format by name, in listing order (the order detection breaks ties in).
REGISTRY: dict[FormatName, Format] = _discover()
FORMATS: tuple[FormatName, ...] = tuple(REGISTRY)
FORMAT_LABELS: dict[FormatName, str] = {f.name: f.label for f in REGISTRY.values()}
