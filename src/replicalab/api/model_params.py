"""Model parameters from the command line (``--set k=v``, ``--compare k=a,b``) and TOML."""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from pathlib import Path
from typing import Any

from replicalab.api.errors import ParameterError
from replicalab.models.base import describe, from_dict

__all__ = ["build", "convert", "describe", "load_toml", "parse_compare", "parse_sets"]

_SCALARS = (bool, int, float, str)


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def convert(cls: type, key: str, text: str, parameter: str = "sets") -> Any:
    """Return ``text`` converted to the type of ``cls``'s field ``key``
    (:class:`ParameterError` naming ``parameter``, sets or compare, if it cannot be).

    A dotted key (``wan.leader``) names a field of a nested parameters dataclass.
    """
    try:
        return _typed(cls, key, text)
    except ValueError as err:
        raise ParameterError(parameter, f"{key}={text!r}: {err}", {"params": "params"}
                             ) from None


def _typed(cls: type, key: str, text: str) -> Any:
    """Return ``text`` as ``cls``'s field ``key`` takes it; ValueError saying why not (the
    fix may name the ``{params}`` parameter)."""
    types = _field_types(cls)
    head, dot, rest = key.partition(".")
    if dot:
        inner = next((t for t in [types.get(head), *typing.get_args(types.get(head))]
                      if dataclasses.is_dataclass(t)), None)
        if inner is None:
            raise ValueError(f"parameter {head!r} has no fields to set")
        return _typed(inner, rest, text)
    if key not in types:
        raise ValueError(f"unknown parameter {key!r}; valid: {', '.join(sorted(types))}")
    kind = types[key]
    options = [t for t in typing.get_args(kind) if t is not type(None)] or [kind]
    for t in options:
        if t is bool:
            if text.lower() in ("true", "yes", "1"):
                return True
            if text.lower() in ("false", "no", "0"):
                return False
        elif t in _SCALARS:
            try:
                return t(text)
            except ValueError:
                continue
        elif typing.get_origin(t) is typing.Literal and text in typing.get_args(t):
            return text
    if text.lower() == "none" and type(None) in typing.get_args(kind):
        return None
    names = " or ".join(getattr(t, "__name__", str(t)) for t in options)
    raise ValueError(f"must be a {names}; set it in a TOML file with {{params}} if it is not "
                     "a plain number or word")


def parse_sets(cls: type, items: list[str]) -> dict[str, Any]:
    """Return {key: value} from ``key=value`` strings, typed by ``cls``'s fields."""
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ParameterError("sets", f"{item!r}: write it as KEY=VALUE, e.g. {{sets}} "
                                         "n=5", {"sets": "sets"})
        key = key.strip()
        value = convert(cls, key, text.strip())
        node = out
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def parse_compare(cls: type, item: str | None) -> tuple[str, list[Any]] | None:
    """Return (key, values) from ``key=a,b,c`` or None."""
    if not item:
        return None
    key, sep, text = item.partition("=")
    if not sep or not text:
        raise ParameterError("compare", f"{item!r}: write it as KEY=V1,V2,..., e.g. "
                                        "n=3,5,7")
    return key.strip(), [convert(cls, key.strip(), v.strip(), "compare")
                         for v in text.split(",")]


def load_toml(path: Path | None) -> dict[str, Any]:
    """Return the parameters in a TOML file (top-level keys or a [params] table)."""
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ParameterError("params", f"{path}: no such file") from None
    except IsADirectoryError:
        raise ParameterError("params", f"{path} is a directory; pass a TOML file") from None
    except OSError as err:
        raise ParameterError("params", f"{path}: cannot read it ({err.strerror})") from None
    except UnicodeDecodeError as err:  # TOML is UTF-8 by definition
        byte = err.object[err.start]
        raise ParameterError("params", f"{path} is not UTF-8 text (byte {byte:#04x} at offset "
                                       f"{err.start}); save it as UTF-8, as TOML files are"
                                       ) from None
    except tomllib.TOMLDecodeError as err:
        raise ParameterError("params", f"{path} is not valid TOML: {err}") from None
    return dict(data.get("params", data))


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def build(cls: type, toml: dict[str, Any], sets: dict[str, Any], what: str) -> Any:
    """Return ``cls`` from TOML values overridden by --set values (validated by cls)."""
    try:
        return from_dict(cls, _merge(toml, sets), what)
    except TypeError as err:
        raise ValueError(f"{what}: {err}") from None
