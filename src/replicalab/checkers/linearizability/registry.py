"""The linearizability models by name: one line per model (pure, no I/O).

``replicalab check --model NAME`` (its ``--help`` lists these), the register workload and
the library's ``check(ops, "NAME")`` all resolve a name here, once, and pass the model
object on. A new model is a :class:`~replicalab.checkers.linearizability.model.Model`
subclass plus one ``register_model(...)`` line, here (and in pyproject.toml's
``replicalab.checkers`` entry-point group) or in the caller's own module; another package
declares its own in that group (``mystack = "mypkg.models:Stack"``), found when a name
that is not here is asked for.
"""

from __future__ import annotations

from typing import Any

from replicalab import plugins
from replicalab.checkers.linearizability.datatype_models import Counter, FifoQueue, Mutex, SetModel
from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.register_models import KV, CasRegister, Register


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, Model) and bool(obj.name and obj.ops)


MODELS: plugins.Registry[type[Model]] = plugins.Registry(
    plugins.CHECKERS, "checker model", accept=_is_model,
    expected="a Model subclass with a name and its ops")
"""Model classes by name, in the order ``--help`` lists them (then those of installed
packages, looked up by name)."""


def register_model(cls: type[Model]) -> type[Model]:
    """Add model class ``cls`` under ``cls.name`` (replacing one of that name); return it."""
    if not cls.name or not cls.ops:
        raise ValueError(f"{cls.__name__}: a model needs a name and its ops")
    MODELS[cls.name] = cls
    return cls


register_model(KV)
register_model(CasRegister)
register_model(Register)
register_model(SetModel)
register_model(FifoQueue)
register_model(Counter)
register_model(Mutex)


def get_model(name: str | Model) -> Model:
    """Return a model object for ``name`` (``name`` itself if it is one); raises
    ValueError naming the known ones."""
    if isinstance(name, Model):
        return name
    try:
        return MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown model {name!r}: use one of {', '.join(MODELS)} "
                         f"{plugins.outside_hint(plugins.CHECKERS, name)}") from None
