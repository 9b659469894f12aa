"""``records.record`` against ``@dataclass`` itself, the reference: the same class made both
ways builds, prints, compares, hashes, refuses assignment, copies (``replace``), converts
(``asdict``), pickles and refuses bad arguments alike; and it compiles no source."""

from __future__ import annotations

import builtins
import dataclasses
import pickle
from dataclasses import FrozenInstanceError, asdict, dataclass, field, fields, replace
from typing import Any

import pytest

from replicalab.records import record


def both(frozen: bool = False, slots: bool = False) -> list[type]:
    """Return the same class made by ``@dataclass`` and by ``@record``."""
    made = []
    for deco in (dataclass(frozen=frozen, slots=slots), record(frozen=frozen, slots=slots)):
        class Point:
            """A point."""

            x: int
            y: Any
            label: str = "p"
            tags: list[str] = field(default_factory=list)
            secret: Any = field(default=None, repr=False, compare=False)

        made.append(deco(Point))
    return made


PICKLED: dict[str, type] = {}


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("slots", [False, True])
def test_a_record_behaves_as_the_dataclass_it_stands_for(frozen: bool, slots: bool) -> None:
    ref, ours = both(frozen, slots)
    for args, kw in [((1, 2), {}), ((1,), {"y": [3]}), ((), {"x": 0, "y": None,
                     "label": "q", "tags": ["a"], "secret": 5}), ((1, float("nan"), "z"), {})]:
        a, b = ref(*args, **kw), ours(*args, **kw)
        assert repr(a) == repr(b)
        assert repr(asdict(a)) == repr(asdict(b))
        assert [f.name for f in fields(b)] == [f.name for f in fields(a)]
        assert (a == ref(*args, **kw)) == (b == ours(*args, **kw))
        assert (replace(a, label="r") == a) == (replace(b, label="r") == b)
        assert repr(replace(b, label="r")) == repr(replace(a, label="r"))
        assert b != a  # another class: neither equal nor an error, as between dataclasses
        assert (a.__eq__(object()) is NotImplemented) and (b.__eq__(object()) is NotImplemented)
    # compare=False fields are left out of == (and of the hash)
    assert (ref(1, 2, secret=1) == ref(1, 2, secret=2)) == (ours(1, 2, secret=1)
                                                           == ours(1, 2, secret=2)) is True
    assert (ref(1, 2) == ref(1, 3)) == (ours(1, 2) == ours(1, 3)) is False
    assert ours.__match_args__ == ref.__match_args__
    if frozen:
        a, b = ref(1, (2,), tags=()), ours(1, (2,), tags=())
        assert hash(a) == hash(ref(1, (2,), tags=(), secret=9))
        assert hash(b) == hash(ours(1, (2,), tags=(), secret=9))
        assert len({b, ours(1, (2,), tags=()), ours(2, (2,), tags=())}) == 2
        for obj in (a, b):
            with pytest.raises(FrozenInstanceError):
                obj.x = 5
            with pytest.raises(FrozenInstanceError):
                del obj.x
    else:
        b = ours(1, 2)
        b.x = 5
        assert b.x == 5
        with pytest.raises(TypeError):
            hash(b)  # as a mutable dataclass with ==: unhashable
        with pytest.raises(TypeError):
            hash(ref(1, 2))


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("slots", [False, True])
def test_bad_arguments_are_refused_as_the_dataclass_refuses_them(frozen: bool, slots: bool
                                                                 ) -> None:
    ref, ours = both(frozen, slots)
    for args, kw in [((), {}), ((1,), {}), ((1, 2, "l", [], None, 6), {}),
                     ((1, 2), {"x": 3}), ((1, 2), {"nope": 1})]:
        with pytest.raises(TypeError):
            ref(*args, **kw)
        with pytest.raises(TypeError):
            ours(*args, **kw)


@record(frozen=True, slots=True)
class Frozen:
    """Pickled by the test below (a module-level class)."""

    a: int
    b: Any = None


@record
class Mutable:
    """Pickled by the test below (a module-level class)."""

    a: int
    b: list[int] = field(default_factory=list)


def test_records_pickle_and_a_default_factory_makes_a_new_value_each_time() -> None:
    f = Frozen(1, (2, 3))
    assert pickle.loads(pickle.dumps(f)) == f
    m = Mutable(1)
    m.b.append(4)
    assert pickle.loads(pickle.dumps(m)) == m
    assert Mutable(2).b == []


def test_a_method_the_class_defines_itself_is_kept() -> None:
    @record(frozen=True)
    class Own:
        """Its own __init__ and __repr__."""

        a: int

        def __init__(self, a: int) -> None:
            object.__setattr__(self, "a", a * 2)

        def __repr__(self) -> str:
            return "own"

    assert Own(2).a == 4 and repr(Own(2)) == "own" and Own(2) == Own(2)


def test_a_record_compiles_no_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of it: ``@dataclass`` compiles each method's source (0.5 ms a class)."""
    calls: list[str] = []
    real_exec = builtins.exec

    def counting_exec(*a: Any, **k: Any) -> Any:
        calls.append("exec")
        return real_exec(*a, **k)

    monkeypatch.setattr(builtins, "exec", counting_exec)
    both(frozen=True, slots=True)
    assert calls, "the reference made through @dataclass should exec its methods"
    calls.clear()
    for frozen in (False, True):
        for slots in (False, True):
            record(frozen=frozen, slots=slots)(type("C", (), {"__annotations__": {"a": "int"},
                                                              "__doc__": "C."}))
    assert calls == [] and dataclasses.dataclass is dataclass
