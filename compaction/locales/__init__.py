"""Texts the engine writes into a context, one module per language.

Adding a language is one file: copy ``en.py`` to ``<code>.py`` and translate the values.
"""
from __future__ import annotations

import importlib
from functools import lru_cache


@lru_cache(maxsize=None)
def texts(language: str = "en") -> dict[str, str]:
    try:
        module = importlib.import_module(f"{__name__}.{language}")
    except ModuleNotFoundError:
        raise ValueError(f"no texts for language {language!r}; add compaction/locales/{language}.py") from None
    base = importlib.import_module(f"{__name__}.en").TEXTS
    return {**base, **module.TEXTS}


def available() -> list[str]:
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__))
