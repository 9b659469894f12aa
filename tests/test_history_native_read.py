"""The native reader of Jepsen log lines (native/src/jepsen_log.rs) gives the ops the Python
reader gives (history/read.py's ``_log_events`` + ``_pair``, the reference), on Porcupine's
102 etcd histories and on lines made to hold what those lack; where it does not take a
file, the Python reader reads it (and names what is wrong) as it always did.

A native reader that drops ``:info`` ops, pairs an invoke with another process's
completion, loses a value or numbers lines differently makes the ops differ."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from replicalab.history import read
from replicalab.history.read import HistoryFileError, read_ops
from servers import server_missing

PORCUPINE = "github.com/anishathalye/porcupine@v1.3.1"


def _native() -> object:
    if read._native_read_log is None:
        server_missing("the native core (replicalab_native with read_jepsen_log)",
                       "not installed: nice -n 10 .venv/bin/pip install ./native")
    return read._native_read_log


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, tuples: bool = False
          ) -> tuple[read.FileHistory, read.FileHistory]:
    native = read_ops(path, tuples=tuples)
    with monkeypatch.context() as m:
        m.setattr(read, "_native_read_log", None)
        python = read_ops(path, tuples=tuples)
    return native, python


@pytest.fixture(scope="module")
def etcd_logs() -> list[Path]:
    """Porcupine's Jepsen etcd histories (from Go's module cache; downloaded if absent)."""
    go = shutil.which("go")
    if go is None:
        server_missing("Go (for Porcupine's corpus)", "go is not on PATH")
    p = subprocess.run([go, "mod", "download", "-json", PORCUPINE], capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        server_missing("Porcupine's module", p.stdout.strip() or p.stderr.strip())
    logs = sorted((Path(json.loads(p.stdout)["Dir"]) / "test_data" / "jepsen").glob("etcd_*.log"))
    return [f for f in logs if f.stat().st_size]


def test_both_readers_give_the_same_ops_on_porcupines_etcd_histories(
        etcd_logs: list[Path], monkeypatch: pytest.MonkeyPatch):
    native_read = _native()
    assert len(etcd_logs) == 102
    infos = 0
    for path in etcd_logs:
        assert native_read(path.read_text(), False) is not None, f"{path.name}: not taken"
        native, python = _both(path, monkeypatch)
        assert native == python, path.name
        infos += sum(o.outcome == "info" for o in native.ops)
    assert infos > 1000  # the corpus's many :info ops are all there


LINES = """\
INFO  jepsen.util - 0\t:invoke\t:read\tnil
INFO  jepsen.util - 1\t:invoke\t:write\t:a
INFO  jepsen.util - :nemesis\t:info\t:start\tnil
INFO  jepsen.util - 2\t:invoke\t:cas\t[1, "two"]
not an event
INFO  jepsen.util - 0\t:ok\t:read\t"x y"\r
INFO  jepsen.util - 1\t:info\t:write\t:timed-out\r\n\
INFO  jepsen.util - 3\t:invoke\t:write\t-7
INFO  jepsen.util - 2\t:fail\t:cas\t[1 "two" 3 :kw nil true false 123456789012 "ab"]
INFO  jepsen.util - 4\t:invoke\t:read\t
INFO  jepsen.util - 4\t:ok\t:read\t+5
INFO  jepsen.util - 5\t:invoke\t:read\tnil
INFO  jepsen.util - 5\t:ok\t:read\tnil
INFO  jepsen.util - 6\t:invoke\t:write\t8   \t
INFO  jepsen.util - 6\t:ok\t:write\tnil
"""


def test_both_readers_agree_on_every_kind_of_line_they_both_take(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    native_read = _native()
    path = tmp_path / "h.log"
    path.write_text(LINES)
    assert native_read(LINES, False) is not None
    native, python = _both(path, monkeypatch)
    assert native == python
    assert native.skipped == 1 and not native.timed
    by_process = {o.process: o for o in native.ops}
    assert by_process[3].outcome == "info" and by_process[3].complete_ns == -1  # never done
    assert by_process[1].outcome == "info" and by_process[1].value == ":a"
    assert by_process[2].error.endswith("...") and by_process[0].value == "x y"
    assert by_process[6].value == 8  # an ok write's nil leaves its invoke's value

    keyed = "".join(f"INFO  jepsen.util - {p}\t:{t}\t:{f}\t[{k} {v}]\n" for p, t, f, k, v in [
        (0, "invoke", "write", 1, 5), (1, "invoke", "read", 1, "nil"), (0, "ok", "write", 1, 5),
        (1, "ok", "read", 1, 5), (2, "invoke", "cas", 2, "[1 2]")])
    path.write_text(keyed.replace("[2 [1 2]]", "[2 3]"))
    assert native_read(path.read_text(), True) is not None
    native, python = _both(path, monkeypatch, tuples=True)
    assert native == python and [o.key for o in native.ops] == [1, 1, 2]


@pytest.mark.parametrize("line", [
    "INFO  jepsen.util - 0\t:invoke\t:read\t1.5",  # a float
    "INFO  jepsen.util - 0\t:invoke\t:read\t[[1 2] 3]",  # nested
    "INFO  jepsen.util - 0\t:invoke\t:read\t{:a 1}",  # a map
    "INFO  jepsen.util - 0\t:invoke\t:read\t\"caf\u00e9\"",  # beyond ASCII
])
def test_what_the_native_reader_leaves_the_python_one_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str):
    native_read = _native()
    text = f"{line}\nINFO  jepsen.util - 0\t:ok\t:read\tnil\n"
    assert native_read(text, False) is None
    path = tmp_path / "h.log"
    path.write_text(text)
    native, python = _both(path, monkeypatch)
    assert native == python and len(native.ops) == 1


@pytest.mark.parametrize(("text", "said"), [
    ("INFO  jepsen.util - 0\t:ok\t:read\t1\n", "with no :invoke before it"),
    ("INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:invoke\t:read\tnil\n",
     "invokes again before its op on line 1 completed"),
    ("INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:ok\t:write\t1\n",
     "completes the :read invoked on line 1"),
    ("INFO  jepsen.util - 0\t:begin\t:read\tnil\n", ":type \"begin\""),
])
def test_malformed_logs_are_named_by_the_python_reader(tmp_path: Path, text: str, said: str):
    assert _native()(text, False) is None
    path = tmp_path / "bad.log"
    path.write_text(text)
    with pytest.raises(HistoryFileError, match=said):
        read_ops(path)


# values Python's equality keeps apart (1 and "1", :a and "a") or that are one (0 read, 0
# written by a cas); a bare cas (its expected value unrecorded, which takes an id of its
# own); fail and info ops
COLUMN_LINES = """\
INFO  jepsen.util - 0\t:invoke\t:write\t1
INFO  jepsen.util - 1\t:invoke\t:cas\t[1 2]
INFO  jepsen.util - 0\t:ok\t:write\t1
INFO  jepsen.util - 2\t:invoke\t:cas\t5
INFO  jepsen.util - 3\t:invoke\t:read\tnil
INFO  jepsen.util - 1\t:fail\t:cas\t[1 2]
INFO  jepsen.util - 3\t:ok\t:read\t"1"
INFO  jepsen.util - 4\t:invoke\t:write\t:a
INFO  jepsen.util - 4\t:ok\t:write\t:a
INFO  jepsen.util - 5\t:invoke\t:cas\t["a" 0]
INFO  jepsen.util - 5\t:ok\t:cas\t["a" 0]
INFO  jepsen.util - 6\t:invoke\t:read\tnil
INFO  jepsen.util - 6\t:ok\t:read\t0
"""


def _columns(path: Path, model: str) -> tuple[object, object, list, list]:
    """Return (the native reader's columns of ``path`` as ``model`` takes them, the
    columns ``encode_columns`` makes of the file's ops under it — the reference — the
    LinOps made from the reader's columns, those ``ops_from_file`` makes: the
    reference)."""
    from replicalab.checkers.linearizability.columns import encode_columns, file_columns
    from replicalab.checkers.linearizability.from_file import ops_from_columns, ops_from_file
    from replicalab.checkers.linearizability.registry import get_model

    m = get_model(model)
    found = read.read_register_log(path)
    assert found is not None, path.name
    (*args, process), values = found
    cols = file_columns(args, m)
    ops = ops_from_file(path, read_ops(path).ops, m)
    return cols, encode_columns(ops, m), ops_from_columns(cols, process, values), ops


def test_the_native_readers_columns_are_those_its_ops_encode_to(
        etcd_logs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A history file's ops go to the native search as the reader made them: the ids
    of values (first seen, as dict.fromkeys numbers them), kinds, outcomes and lines must
    be the ones the checker would have made, and the LinOps made from them (for
    shrinking and explanations) the ones made from the file's ops. An id handed out in
    another order, an unrecorded expected value given no id, or a value, process or
    outcome lost makes them differ."""
    if read._native_read_register is None:
        _native()
        server_missing("read_jepsen_log_register", "an older native build: reinstall ./native")
    for path in etcd_logs:
        native, reference, linops, ops = _columns(path, "cas-register")
        assert native == reference and linops == ops, path.name
    path = tmp_path / "h.log"
    path.write_text(COLUMN_LINES)
    native, reference, linops, ops = _columns(path, "cas-register")
    assert native == reference and linops == ops
    # the LinOps made natively (register_linops) and by the Python fallback alike
    from replicalab.checkers.linearizability import from_file

    if from_file._native_linops is None:
        _native()
        server_missing("register_linops", "an older native build: reinstall ./native")
    monkeypatch.setattr(from_file, "_native_linops", None)
    assert _columns(path, "cas-register")[2] == ops
    monkeypatch.undo()
    # nil 0; 1; the unrecorded expected value id 2 (written -1); "1", :a, "a", 0; then the
    # new values of the cas: 2, 5 and 0 (its id already)
    assert memoryview(native.a).cast("q").tolist() == [1, 1, -1, 3, 4, 5, 6]
    assert memoryview(native.b).cast("q").tolist() == [0, 7, 8, 0, 0, 6, 0]
    path.write_text("".join(line + "\n" for line in COLUMN_LINES.splitlines()
                            if ":cas" not in line))
    native, reference, linops, ops = _columns(path, "register")
    assert native == reference and linops == ops
    # kv reads [key value] tuples and numbers its keys: the reader leaves it to encode_columns
    from replicalab.checkers.linearizability.columns import file_columns
    from replicalab.checkers.linearizability.registry import get_model

    assert file_columns(read.read_register_log(path)[0][:8], get_model("kv")) is None
    # true is 1 to an id but not in a LinOp's value: such a history takes the ops' path
    path.write_text(COLUMN_LINES.replace("[1 2]", "[true 2]"))
    assert read.read_register_log(path) is None


def _verdicts(path: Path, model: str) -> list[dict]:
    """Return what ``replicalab.check`` says of ``path`` (its JSON, times left out)."""
    import replicalab

    doc = replicalab.check(path, model=model, timeout="600s").to_json()
    return [{k: v for k, v in doc.items() if k not in ("check_s", "check_ns", "parts")},
            [{k: v for k, v in p.items() if k != "check_s"} for p in doc["parts"]]]


def test_a_log_is_checked_from_its_columns_as_from_its_ops(
        etcd_logs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A log file checked from the reader's columns (its LinOps made only for a part that
    is not linearizable) gets the verdicts, counterexamples and explanations it gets from
    its ops, with the native search and with the Python one; and a model that does not
    take one of its ops still refuses the file before any check. A columns path that
    skipped the model's own look at the ops, or lost a counterexample's ops, fails."""
    from replicalab.api.checking import open_history
    from replicalab.api.errors import ParameterError
    from replicalab.checkers.linearizability import checker, search

    if read._native_read_register is None:
        _native()
        server_missing("read_jepsen_log_register", "an older native build: reinstall ./native")
    sample = etcd_logs[::17]  # six histories, linearizable and not
    columns = [_verdicts(p, "cas-register") for p in sample]
    with monkeypatch.context() as m:
        m.setattr(read, "_native_read_register", None)
        assert [_verdicts(p, "cas-register") for p in sample] == columns
    assert {c[0]["valid"] for c in columns} == {True, False}
    small = sorted(etcd_logs, key=lambda p: p.stat().st_size)[:2]
    native = [_verdicts(p, "cas-register") for p in small]
    searched = []

    def python_core(*args: object, **kwargs: object) -> object:
        searched.append(1)
        return search.search_part(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(checker, "search_core", python_core)
        assert [_verdicts(p, "cas-register") for p in small] == native
    assert searched  # the reference pipeline ran, not the native one
    path = tmp_path / "cas.log"
    path.write_text(COLUMN_LINES)
    with pytest.raises(ParameterError, match="a cas; the register model has read, write"):
        open_history(path, "register")  # when it is opened, before any history is checked


def test_shrinking_checks_no_set_twice(etcd_logs: list[Path],
                                       monkeypatch: pytest.MonkeyPatch):
    """Shrinking a counterexample asks again for sets it has decided (the ops kept after
    a round are often the prefix that round found failing): each is searched once per
    part. A search per question (88 more of 557 on the 102 histories) fails this."""
    import replicalab
    from replicalab.checkers.linearizability import checker

    searched: list[tuple[object, bool, frozenset[int]]] = []  # holds each part's search
    real = checker.PartSearch._verdict

    def counted(self: checker.PartSearch, constrained: frozenset[int],
                deadline_s: float | None) -> object:
        searched.append((self, self.windowed, constrained))
        return real(self, constrained, deadline_s)

    monkeypatch.setattr(checker.PartSearch, "_verdict", counted)
    bad = 0
    for path in etcd_logs[:30]:
        bad += replicalab.check(path, model="cas-register").valid is False
    assert bad > 10 and len(searched) > 100
    assert len(set(searched)) == len(searched)
