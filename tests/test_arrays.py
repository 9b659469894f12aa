"""replicalab.arrays builds the arrays ``pyarrow.array`` builds, from buffers: held to
``pyarrow.array`` itself on the same input, and to not importing pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab import arrays

TEXT = st.one_of(st.none(), st.text(max_size=8))


@settings(max_examples=100, deadline=None)  # the first example imports pandas
@given(st.lists(TEXT, max_size=40))
def test_strings_are_what_pyarrow_makes(values):
    got = arrays.strings(values)
    got.validate(full=True)
    assert got.equals(pa.array(values, pa.string()))
    assert got.null_count == values.count(None)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples() | st.lists(TEXT, max_size=4).map(tuple), max_size=30))
def test_string_lists_are_what_pyarrow_makes(rows):
    got = arrays.string_lists(rows)
    got.validate(full=True)
    assert got.equals(pa.array(rows, pa.list_(pa.string())))


@pytest.mark.parametrize("typ", [pa.int8(), pa.int32(), pa.int64(), pa.float64()])
def test_numbers_are_copied_as_the_type_asked(typ):
    source = np.array([3, -1, 0, 127], dtype=np.int64)
    got = arrays.numbers(source, typ)
    source[0] = 99  # a copy: the History's arrays keep growing after a save
    assert got.type == typ
    assert got.equals(pa.array([3, -1, 0, 127], typ))


def test_codes_are_a_dictionary_array_over_the_names():
    got = arrays.codes(np.array([1, 0, 1], dtype=np.int8), ("read", "write"))
    assert got.to_pylist() == ["write", "read", "write"]
    assert got.type == pa.dictionary(pa.int8(), pa.string())


def test_too_many_bytes_for_one_array_is_refused_in_words():
    with pytest.raises(ValueError, match="do not fit one Arrow array"):
        arrays._offsets(np.array([2**31 - 1, 1], dtype=np.int64))


def test_saving_a_history_does_not_import_pandas(tmp_path):
    """The reason the module exists: pandas costs a probe about 0.5 s of CPU to import."""
    script = (
        "import sys\n"
        "from replicalab.history.core import History\n"
        "from replicalab.history.io import load_history, save_history\n"
        "h = History()\n"
        "i = h.invoke(1, 'write', ('k',), ('v',), 'eventual', 5)\n"
        "h.ok(i, 7)\n"
        "j = h.invoke(2, 'read', ('k',), (None,), 'consistent', 6)\n"
        "h.ok(j, 9, ('v',), node='n1')\n"
        f"save_history(h, __import__('pathlib').Path({str(tmp_path)!r}), {{}})\n"
        f"back, _ = load_history(__import__('pathlib').Path({str(tmp_path)!r}))\n"
        "assert back.values == h.values and back.node == h.node, (back.values, back.node)\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-800:]
