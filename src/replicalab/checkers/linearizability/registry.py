"""The checker models by name: one line per model (pure, no I/O).

``replicalab check --model NAME`` (its ``--help`` lists these), the register workload and
the library's ``check(ops, "NAME")`` all resolve a name here, once, and pass the model
object on. A new linearizability model is a
:class:`~replicalab.checkers.linearizability.model.Model` subclass plus one
``register_model(...)`` line, here (and in pyproject.toml's ``replicalab.checkers``
entry-point group) or in the caller's own module; another package declares its own in that
group (``mystack = "mypkg.models:Stack"``), found when a name that is not here is asked for.
The transactional models (:data:`TXN_MODELS`, checked by ``checkers/txn``) are listed
beside them, so every list of checker models (:func:`model_names`, an unknown name's
error) holds both kinds.
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

TXN_MODELS: dict[str, str] = {
    "list-append": "transactions of appends to lists and reads of them (Elle)",
    "rw-register": "transactions of writes and reads of registers (Elle)",
}
"""The transactional models (``checkers/txn``) by name, with what they check; named here
without importing that checker, so listing them costs nothing."""


def model_names() -> list[str]:
    """Return every checker model's name: the linearizability models, then the
    transactional ones."""
    return [*MODELS, *TXN_MODELS]


def summary(name: str) -> str:
    """Return one line saying what model ``name`` checks (ValueError for an unknown one)."""
    if name in MODELS:
        return MODELS[name].summary
    if name in TXN_MODELS:
        return TXN_MODELS[name]
    raise ValueError(unknown_model(name))


def is_transactional(name: str) -> bool:
    """Return whether ``name`` is a transactional model (checked by ``checkers/txn``)."""
    return name in TXN_MODELS


def unknown_model(name: object) -> str:
    """Return the one line that refuses model ``name``, naming every model (and, when an
    installed package's name is close, where it would come from)."""
    return (f"unknown model {name!r}: use one of {', '.join(model_names())} "
            f"{plugins.outside_hint(plugins.CHECKERS, str(name))}").rstrip()


def get_model(name: str | Model) -> Model:
    """Return a model object for ``name`` (``name`` itself if it is one); raises
    ValueError naming the known ones."""
    if isinstance(name, Model):
        return name
    try:
        return MODELS[name]()
    except KeyError:
        if name in TXN_MODELS:
            raise ValueError(f"model {name!r} checks transactions (checkers/txn), not "
                             "linearizability") from None
        raise ValueError(unknown_model(name)) from None
