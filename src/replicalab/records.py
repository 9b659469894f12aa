"""Dataclasses made without generated source, for the types a command defines at start-up.

``@dataclass`` writes each class's ``__init__``, ``__repr__``, ``__eq__`` (and for a frozen
class ``__setattr__``, ``__delattr__``, ``__hash__``) as source text and compiles it: about
0.5 ms per class on this machine, 9.6 of the ~50 ms that ``replicalab check`` on one small
history spent before its check began (the 10 result and history types it imports).
:func:`record` makes the same class through ``dataclass`` with those methods turned off, then
gives it methods that are closures over its field names: ``fields``, ``replace``, ``asdict``
and ``__match_args__`` work as on any dataclass; instances compare, hash, print and refuse
assignment (``frozen``) as ``@dataclass`` would make them do. A method the class defines
itself is kept (a hot ``__init__`` may be written out by hand).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, dataclass, fields
from itertools import repeat
from typing import Any, TypeVar

T = TypeVar("T")

_consume = deque(maxlen=0).extend
"""Run an iterator to its end, keeping nothing."""


def record(cls: type[T] | None = None, *, frozen: bool = False, slots: bool = False
           ) -> Any:
    """Return ``cls`` as a dataclass (``frozen``: instances refuse assignment and hash by
    value; ``slots``: ``__slots__`` of its fields), its methods made without compiling
    source (see the module). Use as ``@record`` or ``@record(frozen=True)``."""

    def wrap(c: type[T]) -> type[T]:
        own = set(vars(c))
        out = dataclass(c, init=False, repr=False, eq=False, slots=slots)
        _add_methods(out, own, frozen, slots)
        return out

    return wrap if cls is None else wrap(cls)


def _add_methods(cls: type, own: set[str], frozen: bool, slots: bool) -> None:
    fs = fields(cls)
    names = tuple(f.name for f in fs)
    shown = tuple(f.name for f in fs if f.repr)
    compared = tuple(f.name for f in fs if f.compare)
    hashed = tuple(f.name for f in fs if (f.compare if f.hash is None else f.hash))
    # (name, default, factory) of each field __init__ takes, in order
    spec = tuple((f.name, f.default, f.default_factory) for f in fs if f.init)
    setter: Callable[[Any, str, Any], None] = object.__setattr__ if frozen else setattr
    post_init = getattr(cls, "__post_init__", None)
    title = cls.__name__

    init_names = tuple(name for name, _, _ in spec)
    n = len(spec)

    def bind(args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, ...]:
        if len(args) > n:
            raise TypeError(f"{title}() takes {n} arguments, {len(args)} given")
        out = list(args)
        for name, default, factory in spec[len(args):]:
            value = kw.pop(name, MISSING)
            if value is MISSING:
                if default is not MISSING:
                    value = default
                elif factory is not MISSING:
                    value = factory()
                else:
                    raise TypeError(f"{title}() missing required argument {name!r}")
            out.append(value)
        for name in kw:
            if name in init_names:
                raise TypeError(f"{title}() got multiple values for argument {name!r}")
            raise TypeError(f"{title}() got an unexpected keyword argument {name!r}")
        return tuple(out)

    def __init__(self: Any, *args: Any, **kw: Any) -> None:
        # the values in field order, then one C-level loop of setters: within ~20 % of
        # the generated __init__ (records are made by the hundred per command)
        _consume(map(setter, repeat(self, n), init_names,
                     args if not kw and len(args) == n else bind(args, kw)))
        if post_init is not None:
            post_init(self)

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (tuple(getattr(self, n) for n in compared)
                == tuple(getattr(other, n) for n in compared))

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in hashed))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self: Any, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self: Any) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in names)

    def __setstate__(self: Any, state: tuple[Any, ...]) -> None:
        for n, v in zip(names, state, strict=True):
            object.__setattr__(self, n, v)

    made: dict[str, Any] = {"__init__": __init__, "__repr__": __repr__, "__eq__": __eq__,
                            "__hash__": None}  # @dataclass leaves a mutable class unhashable
    if frozen:
        made |= {"__hash__": __hash__, "__setattr__": __setattr__, "__delattr__": __delattr__}
        if slots:  # unpickled through object.__setattr__, as @dataclass's frozen slots are
            made |= {"__getstate__": __getstate__, "__setstate__": __setstate__}
    for name, fn in made.items():
        if name not in own:
            if fn is not None:
                fn.__qualname__ = f"{cls.__qualname__}.{name}"
            setattr(cls, name, fn)
