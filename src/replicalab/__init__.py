"""replicalab: measure, model and enforce consistency of replicated data stores.

From Python: ``replicalab.probe(...)``, ``replicalab.open_run(...)``, ``check``, ``compare``,
``scorecard``, ``model`` (``replicalab.api``, docs/python-api.md), loaded on first use.
"""

from typing import Any

__version__ = "0.1.0"

_API = ("probe", "open_run", "check", "compare", "scorecard", "model", "Run")


def __getattr__(name: str) -> Any:
    # the API loads numpy, pyarrow and the stores: only when asked for, so the command
    # line (which imports this package first) starts as fast as before
    if name in _API:
        import importlib

        return getattr(importlib.import_module("replicalab.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
