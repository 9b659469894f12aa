"""The linearizability models by name: one line per model (pure, no I/O).

``replicalab check --model NAME`` (its ``--help`` lists these), the register workload and
the library's ``check(ops, "NAME")`` all resolve a name here, once, and pass the model
object on. A new model is a :class:`~replicalab.checkers.linearizability.model.Model`
subclass plus one ``register_model(...)`` line, here or in the caller's own module.
"""

from __future__ import annotations

from replicalab.checkers.linearizability.datatype_models import Counter, FifoQueue, Mutex, SetModel
from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.register_models import KV, CasRegister, Register

MODELS: dict[str, type[Model]] = {}
"""Model classes by name, in the order ``--help`` lists them."""


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
        raise ValueError(f"unknown model {name!r}: use one of {', '.join(MODELS)}") from None
