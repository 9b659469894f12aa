"""replicalab: measure, model and enforce consistency of replicated data stores.

From Python: ``replicalab.probe(...)``, ``replicalab.open_run(...)``, ``check``, ``export``,
``read_history``, ``compare``, ``scorecard``, ``model`` (``replicalab.api``, every verb
there; docs/python-api.md), loaded on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__version__ = "0.1.0"

def lazy_exports(package: str, where: dict[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a package's ``__getattr__`` and ``__dir__`` (PEP 562) that import each name
    of ``where`` (name -> the submodule defining it) on first use and keep it in the
    package, so importing the package, or one of its modules, loads nothing else."""
    import importlib
    import sys

    def __getattr__(name: str) -> Any:
        sub = where.get(name)
        if sub is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{sub}"), name)
        setattr(sys.modules[package], name, value)  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[package]), *where])

    return __getattr__, __dir__


# the API loads numpy, pyarrow and the stores: only when asked for, so the command line
# (which imports this package first) starts as fast as before
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(
    ("probe", "open_run", "check", "compare", "scorecard", "model", "tradeoff", "Run",
     "export", "read_history"), "api"))
