"""Elle's own test cases, ported: every assertion of Elle's list-append, rw-register,
consistency-model, txn, bfs and core tests whose answer is a verdict, an anomaly set, a
not/also-not set, a graph or a cycle, as our own EDN data (tests/data/elle/*.edn, each
case naming the Elle test it follows), expecting Elle's answer (or, where we answer
otherwise on purpose, ours with the reason: ``:differs``).

Histories go through the same path as ``replicalab check``: written as an EDN file, read
by ``history.read`` (completions only, nemesis left out), checked by each engine."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from replicalab.checkers.txn import Options, TxnInputError, check_file, models
from replicalab.checkers.txn import cycles as cyc
from replicalab.checkers.txn.graph import classify, realtime_edges, tarjan
from replicalab.checkers.txn.run import native_core
from replicalab.checkers.txn.types import EDGE_NAMES, NEVER, OK, RW, WR, Txn
from replicalab.history.read import Keyword, Tagged, edn_text, parse_edn

DATA = Path(__file__).parent / "data" / "elle"
ENGINES = ["python"] + (["native"] if native_core() is not None else [])


def norm(v: Any) -> Any:
    """Return EDN data as plain Python: keywords as their names."""
    if isinstance(v, Keyword):
        return str.__str__(v)
    if isinstance(v, Tagged):
        return norm(v.value)
    if isinstance(v, dict):
        return {norm(k): norm(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [norm(x) for x in v]
    if isinstance(v, frozenset | set):
        return {norm(x) for x in v}
    return v


def load(name: str) -> list[dict[str, Any]]:
    (forms,) = [f for f, _ in parse_edn((DATA / name).read_text(), name)]
    return [norm(c) for c in forms]


def cases(name: str) -> list[Any]:
    return [pytest.param(c, id=c["elle"]) for c in load(name)]


# -- Elle's notation for transactions -------------------------------------------------------

def la_op(text: str) -> list[list[Any]]:
    """Elle's list-append test notation: "ax1ry12" is [[:append :x 1] [:r :y [1 2]]]."""
    txn: list[list[Any]] = []
    mop: list[Any] | None = None
    for c in text:
        if c in "ar":
            if mop is not None:
                txn.append(mop)
            mop = ["append" if c == "a" else "r"]
        elif c in "xyztu":
            mop.append(Keyword(c))  # type: ignore[union-attr]
        else:
            assert mop is not None
            if mop[0] == "append":
                mop[2:] = [int(c)]
            else:
                mop[2:] = [[*(mop[2] if len(mop) > 2 else []), int(c)]]
    if mop is not None:
        txn.append(mop)
    return [[Keyword(m[0]), *m[1:]] for m in txn]


def rw_op(text: str) -> list[list[Any]]:
    """Elle's rw-register test notation: "wx1ry_" is [[:w :x 1] [:r :y nil]]."""
    txn: list[list[Any]] = []
    mop: list[Any] | None = None
    for c in text:
        if c in "wr":
            if mop is not None:
                txn.append(mop)
            mop = [Keyword(c)]
        elif c in "xyz":
            mop.append(Keyword(c))  # type: ignore[union-attr]
        else:
            mop[2:] = [None if c == "_" else int(c)]  # type: ignore[index]
    if mop is not None:
        txn.append(mop)
    return txn


def events(history: list[Any], model: str) -> list[dict[str, Any]]:
    """Return the op maps of a case's history (see the data files' headers)."""
    notation = la_op if model == "list-append" else rw_op
    out: list[dict[str, Any]] = []
    for h in history:
        if isinstance(h, str):
            out.append({"type": Keyword("ok"), "process": 0, "value": notation(h)})
        elif isinstance(h, list) and h[0] == "pair":
            process, text = (h[1], h[2]) if len(h) == 3 else (0, h[1])
            value = notation(text)
            invoke = [[m[0], m[1], None] if m[0] == "r" else m for m in value]
            out.append({"type": Keyword("invoke"), "process": process, "value": invoke})
            out.append({"type": Keyword("ok"), "process": process, "value": value})
        elif isinstance(h, list) and h[0] == "op":
            out.append({"type": Keyword(h[2]), "process": h[1], "value": notation(h[3])})
        else:
            op = dict(h)
            op["type"] = Keyword(op["type"])
            op["value"] = _keywords(op["value"])
            out.append(op)
    for op in out:
        op.setdefault("f", Keyword("txn"))
        op.pop("f")
        op["f"] = Keyword("txn")
    return out


def _keywords(value: Any) -> Any:
    """Return a value whose micro-op names and keys (plain names after loading) are EDN
    keywords again."""
    out = []
    for m in value:
        key = Keyword(m[1]) if isinstance(m[1], str) else m[1]
        out.append([Keyword(m[0]), key, *m[2:]])
    return out


def write_history(path: Path, ops: list[dict[str, Any]]) -> Path:
    lines = ["{" + ", ".join(f":{k} {edn_text(v)}" for k, v in op.items()) + "}" for op in ops]
    path.write_text("\n".join(lines) + ("\n" if lines else ""))
    return path


def options(case: dict[str, Any]) -> Options:
    o = case.get("opts", {})
    cm = o.get("consistency-models", ["strict-serializable"])
    order = o.get("transaction-order")
    return Options(tuple(cm) if cm is not None else None, tuple(o.get("anomalies") or ()),
                   wfr_keys=bool(o.get("wfr-keys?")),
                   sequential_keys=bool(o.get("sequential-keys?")),
                   linearizable_keys=bool(o.get("linearizable-keys?")),
                   transaction_order=tuple(sorted(order.items())) if order else None)


def expected(case: dict[str, Any]) -> dict[str, Any]:
    """Return the answer the test holds us to: Elle's, or ours where the case says why
    we differ."""
    if "differs" in case:
        assert case["differs"] and "ours" in case
        return case["ours"]
    return case["expect"]


def assert_result(r: Any, want: dict[str, Any]) -> None:
    if "valid?" in want:
        assert r.valid == want["valid?"]
    if "valid-truthy" in want:
        assert r.valid in (True, "unknown")
    if "anomaly-types" in want:
        assert r.anomaly_types == want["anomaly-types"]
    if "not" in want:
        assert set(r.not_) == set(want["not"])
    if "also-not" in want:
        assert set(r.also_not) == set(want["also-not"])


def history_file(case: dict[str, Any], model: str, tmp_path: Path) -> Path:
    if case.get("kind") == "file":
        src = DATA / case["file"]
        if src.suffix == ".gz":
            out = tmp_path / src.stem
            out.write_bytes(gzip.decompress(src.read_bytes()))
            return out
        return src
    if case.get("kind") == "unfindable-g-single":
        return write_history(tmp_path / "h.edn", unfindable_g_single(case["ring"],
                                                                     case["noise"]))
    return write_history(tmp_path / "h.edn", events(case["history"], model))


def unfindable_g_single(n: int, noise: int) -> list[dict[str, Any]]:
    """Elle's construction: a ring of ``n`` transactions appending 0..n-1 to :ring, the
    first appending to :anti and the last reading :anti empty (one G-single), a read of
    the ring's order, and per link a chain of ``noise`` appends ending in a rw-rw hop to
    the ring's first transaction (G2-item noise). Elle's :anti element :first is -1
    here (values are integers), its [:anti i] keys strings."""
    ok, inv = Keyword("ok"), Keyword("invoke")
    a, r = Keyword("append"), Keyword("r")
    txns: list[tuple[int, list[list[Any]]]] = []
    for i in range(n):
        last = [a, Keyword("anti"), -1] if i == 0 else [r, Keyword("anti"), None] \
            if i == n - 1 else [a, i, 0]
        txns.append((0, [[a, Keyword("ring"), i], last]))
    txns.append((1, [[r, Keyword("ring"), list(range(n))]]))
    for i in range(1, n - 1):
        for j in range(1, noise):
            if j == noise - 2:
                value = [[r, i, list(range(noise - 2))], [r, f"anti-{i}", None]]
            elif j == noise - 1:
                value = [[a, f"anti-{i}", 0], [r, Keyword("ring"), None]]
            else:
                value = [[a, i, j]]
            txns.append((2, value))
    out = []
    for p, value in txns:
        out.append({"type": inv, "f": Keyword("txn"), "process": p,
                    "value": [[m[0], m[1], None] if m[0] == r else m for m in value]})
        out.append({"type": ok, "f": Keyword("txn"), "process": p, "value": value})
    return out


# -- the cases -----------------------------------------------------------------------------

def _run(case: dict[str, Any], model: str, engine: str, tmp_path: Path) -> None:
    kind = case.get("kind", "check")
    opts = options(case)
    want = expected(case)
    if kind == "error" or "error" in want:
        with pytest.raises(TxnInputError, match=want["error"]):
            check_file(history_file(case, model, tmp_path), model, opts, engine=engine)
        return
    if kind == "edges":
        _edges(case, model, tmp_path, want)
        return
    if kind == "wr-cycle":
        _wr_cycle(case, model, tmp_path, want)
        return
    if kind == "anomalies":
        _anomalies(case, model, engine, tmp_path, want)
        return
    r = check_file(history_file(case, model, tmp_path), model, opts, engine=engine)
    assert_result(r, want)


def _txns(case: dict[str, Any], model: str, tmp_path: Path) -> list[Txn]:
    from replicalab.checkers.txn.prepare import from_file_ops
    from replicalab.history.read import read_ops

    path = history_file(case, model, tmp_path)
    return from_file_ops(read_ops(path, lone_completions=True).ops)[0]


def _edges(case: dict[str, Any], model: str, tmp_path: Path, want: dict[str, Any]) -> None:
    from replicalab.checkers.txn import listappend, register

    txns = _txns(case, model, tmp_path)
    edges = (listappend.analyse(txns) if model == "list-append"
             else register.analyse(txns))[0]
    kinds = set(case.get("kinds", ["ww", "wr", "rw"]))
    got = {(e[0], e[1]) for e in edges if EDGE_NAMES[e[2]] in kinds}
    assert got == {tuple(e) for e in want["edges"]}


def _wr_cycle(case: dict[str, Any], model: str, tmp_path: Path, want: dict[str, Any]
              ) -> None:
    from replicalab.checkers.txn import register

    txns = _txns(case, model, tmp_path)
    edges = [e for e in register.analyse(txns)[0] if e[2] == WR]
    adj: list[list[int]] = [[] for _ in txns]
    for e in edges:
        adj[e[0]].append(e[1])
    comp = tarjan(len(txns), adj)
    assert any(comp[e[0]] == comp[e[1]] for e in edges) == want["cycle"]


def _anomalies(case: dict[str, Any], model: str, engine: str, tmp_path: Path,
               want: dict[str, Any]) -> None:
    histories = ([[h] for h in case["history"]] if case.get("one-by-one")
                 else [case["history"]])
    got: dict[str, list[list[int]]] = {t: [] for t in want["anomalies"]}
    for i, h in enumerate(histories):
        sub = {**case, "history": h}
        path = write_history(tmp_path / f"h{i}.edn", events(sub["history"], model))
        r = check_file(path, model, Options(None, ("G1", "internal", "future-read")),
                       engine=engine)
        for t in got:
            got[t].extend(sorted(an.txns for an in r.anomalies.get(t, [])))
            assert r.counts.get(t, 0) == len(r.anomalies.get(t, []))
    assert got == {t: sorted(v) for t, v in want["anomalies"].items()}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", cases("list_append.edn"))
def test_list_append(case: dict[str, Any], engine: str, tmp_path: Path) -> None:
    _run(case, "list-append", engine, tmp_path)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", cases("rw_register.edn"))
def test_rw_register(case: dict[str, Any], engine: str, tmp_path: Path) -> None:
    _run(case, "rw-register", engine, tmp_path)


@pytest.mark.parametrize("case", cases("consistency_model.edn"))
def test_consistency_model(case: dict[str, Any]) -> None:
    fn, args, want = case["fn"], case.get("args", []), case["expect"]
    adds = set(case.get("ours-adds", []))
    if isinstance(want, dict) and "error" in want:
        with pytest.raises(ValueError, match=want["error"]):
            models.prohibited_by(args)
        return
    if fn == "all-anomalies":
        got = models.ordered(models.depths())
        assert [a for a in got if a not in adds] == want
        assert adds <= set(got)
    elif fn == "implied-anomalies":
        assert sorted(models.implied_anomalies(args)) == sorted(want)
    elif fn in ("weakest", "strongest"):
        f = models.weakest if fn == "weakest" else models.strongest
        assert {models.friendly(m) for m in f(args)} == want
    elif fn == "prohibited-by":
        assert models.prohibited_by(args) == want | adds
    elif fn == "impossible-models":
        assert {models.friendly(m) for m in models.impossible_models(args)} == want
    elif fn == "boundary":
        not_, also = models.boundary(args)
        assert (set(not_), set(also)) == (want["not"], want["also-not"])
    elif fn == "boundary-not":
        assert set(models.boundary(args)[0]) == want
    elif fn == "models-implying":
        assert models.models_implying(args) == want
    else:
        raise AssertionError(f"unknown :fn {fn}")


def _graph_edges(case: dict[str, Any]) -> tuple[int, list[Any], dict[int, int]]:
    names = sorted({v for e in case["edges"] for v in e[:2]})
    pos = {v: i for i, v in enumerate(names)}
    kind = {n: i for i, n in enumerate(EDGE_NAMES)}
    edges = [(pos[a], pos[b], kind[k], None, None, None) for a, b, k in case["edges"]]
    return len(names), edges, {i: v for v, i in pos.items()}


@pytest.mark.parametrize("case", cases("txn.edn"))
def test_cycle_exists_cases(case: dict[str, Any]) -> None:
    n, edges, _ = _graph_edges(case)
    g = cyc.Graph(n, edges)
    comps = {c: cyc.Component(vs) for c, vs in g.components.items()}
    cyc._cycle_exists(g, comps)
    (c,) = comps.values()
    assert [t for t, _ in c.exists] == case["expect"]


@pytest.mark.parametrize("case", cases("bfs.edn"))
def test_cycle_search_per_class(case: dict[str, Any]) -> None:
    """Elle's search for one class in a graph: is there a simple cycle of exactly that
    class (our enumeration), and does the checker's decision agree (found, or implied
    by a class it found)."""
    n, edges, name = _graph_edges(case)
    want = case["expect"]["cycle"]
    typ = case["class"]
    base, var = cyc.split(typ)
    mask = cyc._MASK[base] | cyc._X[var]
    g = cyc.Graph(n, edges)
    found = None
    for c in g.components.values():
        found = found or cyc._dfs(g, cyc.Component(c), typ, mask, cyc.Budget(10**6, None))
        comp = cyc.Component(c)
        cyc._decide(g, typ, [comp], cyc.Budget(10**6, None))
        for t, cycle in comp.found.items():
            assert classify(g.kinds(cycle)) == t
        implied = any(typ in models.implied_anomalies([t]) for t in comp.found)
        if found is not None:
            assert implied  # found itself, or a class that implies it
        else:
            assert typ not in comp.found
    assert (found is not None) == (want is not None)
    if found is not None:
        verts = [name[g.edges[i][0]] for i in found]
        assert classify(g.kinds(found)) == typ
        assert len(set(verts)) == len(verts)  # a simple cycle
        if sorted(verts) == sorted(want[:-1]):  # Elle's cycle, up to where it starts
            k = verts.index(want[0])
            assert verts[k:] + verts[:k] == want[:-1]


@pytest.mark.parametrize("case", cases("core.edn"))
def test_realtime_graph(case: dict[str, Any]) -> None:
    names = sorted({e[1] for e in case["events"]})
    txns = [Txn(i, i, OK, NEVER, NEVER, []) for i in range(len(names))]
    for pos, (typ, name) in enumerate(case["events"]):
        t = txns[names.index(name)]
        if typ == "invoke":
            t.invoke = pos
        else:
            t.complete = pos
    got = {(names[e[0]], names[e[1]]) for e in realtime_edges(txns)}
    assert got == {tuple(e) for e in case["expect"]}


def test_port_counts_are_what_the_docs_say() -> None:
    """docs/transactions.md gives the number of ported cases: keep it true."""
    counts = {f: len(load(f)) for f in ("list_append.edn", "rw_register.edn",
                                        "consistency_model.edn", "txn.edn", "bfs.edn",
                                        "core.edn")}
    total = sum(counts.values())
    doc = (Path(__file__).parents[1] / "docs" / "transactions.md").read_text()
    assert f"{total} of Elle's test cases" in doc, counts
    differs = sum(1 for f in counts for c in load(f) if "differs" in c)
    assert f"{differs} where we answer otherwise" in doc


def test_rw_register_version_reader_refuses_rw_edges_from_unread_values() -> None:
    """A guard on the port itself: Elle's rw-register infers no rw edge into a write
    no one read before (the initial state aside)."""
    from replicalab.checkers.txn import register

    txns = [Txn(0, 0, OK, 0, 1, [("w", "x", 1)]), Txn(1, 1, OK, 2, 3, [("w", "x", 2)])]
    assert not [e for e in register.analyse(txns)[0] if e[2] == RW]
