"""Process-wide setup that must happen before tiktoken or litellm are touched.

tiktoken downloads its BPE files on first use; this machine class has no
network, so we point it at the copies litellm ships. litellm fetches its model
price table from the network at import unless told to use the bundled one.
Both settings respect values the operator already exported.
"""
from __future__ import annotations

import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any


def _litellm_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def configure() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        base = _litellm_dir()
        if base is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(base / "litellm_core_utils" / "tokenizers")


@lru_cache(maxsize=1)
def model_table() -> dict[str, Any]:
    """litellm's bundled model table (context windows, prices), read without importing litellm."""
    base = _litellm_dir()
    if base is None:
        return {}
    path = base / "model_prices_and_context_window_backup.json"
    try:
        table: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        return {}
    return table


def litellm() -> ModuleType:
    """Import litellm lazily: it costs seconds and ~165 MB, and most engine paths never need it."""
    configure()
    import litellm as _litellm  # noqa: PLC0415  (litellm costs ~3 s and ~165 MB to import)

    _litellm.suppress_debug_info = True
    module: ModuleType = _litellm
    return module


configure()
