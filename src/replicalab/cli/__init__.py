"""The ``replicalab`` command line: one module per verb, thin (parse, call, render).

Importing it defers two standard modules that a command rarely uses but that modules it
loads import (:class:`_Deferred`): ``inspect`` (imported by ``dataclasses``, which calls
it only for a dataclass without a docstring; it pulls in ``ast``, ``dis`` and
``tokenize``) and ``ipaddress`` (imported by ``urllib.parse``, which ``pathlib`` imports,
for bracketed IPv6 hosts). Together they were a tenth of ``replicalab check FILE``'s
start-up.
"""

import sys
import types
from typing import Any


class _Deferred(types.ModuleType):
    """A stand-in in ``sys.modules`` for a standard module not imported yet: ``import
    name`` binds it without loading anything; its first attribute look-up imports the
    real module (which then replaces it in ``sys.modules``) and every look-up is passed
    on to it. (``importlib.util.LazyLoader`` cannot do this on Python 3.11: a second
    ``import`` of a lazy module reads its ``__spec__`` and loads it.)"""

    def __getattr__(self, attr: str) -> Any:
        real = sys.modules.get(self.__name__)
        if real is self:
            del sys.modules[self.__name__]
            import importlib

            real = importlib.import_module(self.__name__)
        return getattr(real, attr)


for _name in ("inspect", "ipaddress"):
    if _name not in sys.modules:
        sys.modules[_name] = _Deferred(_name)
