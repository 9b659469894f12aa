"""Arrow arrays built from their buffers.

``pyarrow.array`` asks, on its first call in a process, whether its argument is a pandas
object, and to answer it imports pandas: about 0.5 s of CPU (846 M instructions) in every
process that saves a history, which is every ``probe``. These functions build the same
arrays from numpy buffers, which needs no pandas; ``tests/test_arrays.py`` holds each to
``pyarrow.array`` on the same input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_INT32_MAX = 2**31 - 1


def numbers(values: Sequence[int] | np.ndarray, typ: pa.DataType) -> pa.Array:
    """Return ``values`` (integers or floats, no nulls) as an Arrow array of ``typ``, copied."""
    data = np.array(values, dtype=typ.to_pandas_dtype())
    return pa.Array.from_buffers(typ, len(data), [None, pa.py_buffer(data)])


def _validity(missing: np.ndarray) -> tuple[pa.Buffer | None, int]:
    nulls = int(missing.sum())
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(~missing, bitorder="little")), nulls


def _offsets(lengths: np.ndarray) -> pa.Buffer:
    ends = np.cumsum(lengths, dtype=np.int64)
    if len(ends) and ends[-1] > _INT32_MAX:
        raise ValueError(f"{ends[-1]:,} items or bytes do not fit one Arrow array (2 GiB)")
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    offsets[1:] = ends
    return pa.py_buffer(offsets)


def strings(values: Sequence[str | None]) -> pa.Array:
    """Return ``values`` as an Arrow ``string`` array, ``None`` as null."""
    n = len(values)
    missing = np.fromiter((v is None for v in values), dtype=bool, count=n)
    encoded = [b"" if v is None else v.encode() for v in values]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
    validity, nulls = _validity(missing)
    return pa.Array.from_buffers(pa.string(), n,
                                 [validity, _offsets(lengths), pa.py_buffer(b"".join(encoded))],
                                 null_count=nulls)


def string_lists(rows: Sequence[Sequence[str | None]]) -> pa.Array:
    """Return ``rows`` as an Arrow ``list<string>`` array (no null lists; ``None`` items as
    null strings)."""
    n = len(rows)
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=n)
    flat = [item for row in rows for item in row]
    return pa.Array.from_buffers(pa.list_(pa.string()), n, [None, _offsets(lengths)],
                                 children=[strings(flat)])


def codes(values: Sequence[int] | np.ndarray, names: Sequence[str]) -> pa.DictionaryArray:
    """Return the int8 codes ``values`` as an Arrow dictionary array over ``names``."""
    return pa.DictionaryArray.from_arrays(numbers(values, pa.int8()), strings(names))
