"""Cycle search, complete or "unknown": per strongly connected component, Elle's cycle
classes in Elle's order, each decided exactly.

Elle (``elle.txn``) searches each component for G-single-item, G0, G-nonadjacent-item,
G1c, G2-item and their ``-process`` / ``-realtime`` variants, in order of severity,
skipping a class another class found already implies; a class is a simple cycle whose
edges it allows (G0: ww; G1c: ww and wr, one wr at least; G-single-item: exactly one rw;
G-nonadjacent-item: two rw or more, never two in a row; G2-item: two rw or more, two in
a row; a variant: one process / real-time edge at least). Elle's own search is a
breadth-first one under a timeout. Here each class is decided by a test that is exact:

* a class whose cycle needs one edge of some kind, and nothing else, is present iff
  such an edge lies inside a strongly connected component of the edges the class may
  use (Tarjan; G0, G1c, the variants of G0, G2-item once the classes it excludes are
  absent);
* G-single-item: a rw edge a -> b with a path b ~> a of ww/wr edges (reachability on
  the condensation, pruned by topological order and longest-path levels, under a
  step budget);
* G-nonadjacent-item: a closed walk with no two rw edges in a row is a cycle of a graph
  of (transaction, last edge was rw) states, found by Tarjan; when ww and wr (and the
  variant's edge) are acyclic a walk holds a simple cycle of the class.

A test's cycle is always checked by its edges; when it is of another class, or a test's
assumptions do not hold, a depth-first enumeration of simple cycles decides the class,
under the step budget. A class left undecided when the budget or the deadline runs out
is reported as such (``Unfinished``), never taken as absent. Before all this, Elle's
"cycle exists" tests (one Tarjan per model: is there any cycle a model forbids?) rule
classes out wholesale, and stay in the result when a search stopped (Elle's
``PL-SI-cycle-exists`` ...), so a model is still ruled out without a cycle to show.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from replicalab.checkers.txn import models
from replicalab.checkers.txn.graph import KIND_BITS, classify, tarjan
from replicalab.checkers.txn.types import PROCESS, REALTIME, RW, WR, WW

Edge = tuple[int, int, int, Any, Any, Any]
BASES = ("G0", "G1c", "G-single-item", "G-nonadjacent-item", "G2-item")
VARIANTS = ("", "-process", "-realtime")
CYCLE_TYPES = tuple(models.ordered(b + v for b in BASES for v in VARIANTS))
"""Every class searched, in Elle's order."""
_WW, _WR, _RW, _P, _RT = (KIND_BITS[k] for k in (WW, WR, RW, PROCESS, REALTIME))
_MASK = {"G0": _WW, "G1c": _WW | _WR, "G-single-item": _WW | _WR | _RW,
         "G-nonadjacent-item": _WW | _WR | _RW, "G2-item": _WW | _WR | _RW}
_X = {"": 0, "-process": _P, "-realtime": _RT}

# (model, kinds, extension): the models whose forbidden cycles Elle proves exist
EXISTS_SPECS = (
    ("PL-1", _WW, False), ("PL-2", _WW | _WR, False), ("PL-SI", _WW | _WR, True),
    ("PL-2.99", _WW | _WR | _RW, False), ("PL-3", _WW | _WR | _RW, False),
    ("strong-session-PL-1", _WW | _P, False), ("strong-session-PL-2", _WW | _WR | _P, False),
    ("strong-session-snapshot-isolation", _WW | _WR | _P, True),
    ("strong-session-serializable", _WW | _WR | _RW | _P, False),
    ("strong-PL-1", _WW | _RT, False), ("strong-PL-2", _WW | _WR | _RT, False),
    ("strong-snapshot-isolation", _WW | _WR | _RT, True),
    ("PL-SS", _WW | _WR | _RW | _RT, False),
)
DFS_STEPS = 2_000_000
"""Most steps one depth-first search may take (of the budget left)."""
MAX_ORDERED = 7
"""Most unread appenders of one key whose every order is tried (7! = 5,040 orders)."""


def split(typ: str) -> tuple[str, str]:
    """Return (base class, variant suffix) of a cycle class."""
    for v in ("-process", "-realtime"):
        if typ.endswith(v):
            return typ[: -len(v)], v
    return typ, ""


class Budget:
    """Search steps left and a deadline (``time.monotonic()`` seconds, None: none)."""

    def __init__(self, steps: int, deadline_s: float | None) -> None:
        self.steps = steps
        self.deadline_s = deadline_s
        self.hit = ""

    def spend(self, n: int) -> bool:
        """Take ``n`` steps; return False (and remember which limit) once the steps or
        the deadline are exhausted."""
        self.steps -= n
        if self.steps < 0:
            self.hit = "steps"
            return False
        if self.deadline_s is not None and time.monotonic() >= self.deadline_s:
            self.hit = "deadline"
            return False
        return True


class OutOfBudget(Exception):
    """A search stopped on its budget or the deadline."""


@dataclass
class Component:
    """One nontrivial strongly connected component and what its search found."""

    members: list[int]
    redundant: set[str] = field(default_factory=set)
    found: dict[str, list[int]] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)
    unknown: dict[str, str] = field(default_factory=dict)
    exists: list[tuple[str, list[int]]] = field(default_factory=list)


@dataclass
class Findings:
    """What the search found: ``cycles`` (class, its edges) Elle would report (one per
    class and component, after its redundancy rules), ``exists`` (type, vertices) the
    cycle-exists cases of components whose search stopped, ``unfinished`` (component
    size, sample, classes left undecided, limit), ``on_cycle`` the transactions on a
    cycle of ww/wr/rw edges."""

    cycles: list[tuple[str, list[Edge]]]
    exists: list[tuple[str, list[int]]]
    unfinished: list[tuple[int, list[int], list[str], str]]
    on_cycle: list[int]


class Graph:
    """The dependency graph's edges inside its strongly connected components."""

    def __init__(self, n: int, edges: list[Edge]) -> None:
        self.n = n
        whole: list[list[int]] = [[] for _ in range(n)]
        for s, d, *_ in edges:
            whole[s].append(d)
        self.comp = tarjan(n, whole)
        seen: set[tuple[int, int, int]] = set()
        self.edges: list[Edge] = []
        for e in edges:
            s, d, k = e[0], e[1], e[2]
            if s != d and self.comp[s] == self.comp[d] and (s, d, k) not in seen:
                seen.add((s, d, k))
                self.edges.append(e)
        self.bits = [KIND_BITS[e[2]] for e in self.edges]
        self.out: list[list[int]] = [[] for _ in range(n)]
        for i, e in enumerate(self.edges):
            self.out[e[0]].append(i)
        groups: dict[int, list[int]] = {}
        for e in self.edges:
            groups.setdefault(self.comp[e[0]], []).append(e[0])
        self.components = {c: sorted(set(vs)) for c, vs in groups.items()}
        self._sub: dict[int, list[int]] = {}

    def sub(self, mask: int) -> list[int]:
        """Return each vertex's component id in the graph of the edges of ``mask``."""
        if mask not in self._sub:
            adj = [[self.edges[i][1] for i in out if self.bits[i] & mask]
                   for out in self.out]
            self._sub[mask] = tarjan(self.n, adj)
        return self._sub[mask]

    def path(self, src: int, dst: int, mask: int, within: list[int] | None = None
             ) -> list[int] | None:
        """Return the edge ids of a shortest path src ~> dst over ``mask`` edges (staying
        in the ``within`` component ids if given), or None."""
        if src == dst:
            return []
        parent: dict[int, int] = {src: -1}
        queue = deque([src])
        target = within[src] if within is not None else None
        while queue:
            v = queue.popleft()
            for i in self.out[v]:
                if not self.bits[i] & mask:
                    continue
                w = self.edges[i][1]
                if w in parent or (within is not None and within[w] != target):
                    continue
                parent[w] = i
                if w == dst:
                    out = []
                    while w != src:
                        i = parent[w]
                        out.append(i)
                        w = self.edges[i][0]
                    return out[::-1]
                queue.append(w)
        return None

    def kinds(self, cycle: list[int]) -> list[int]:
        """Return the edge kinds of a cycle (edge ids)."""
        return [self.edges[i][2] for i in cycle]


def search(n: int, edges: list[Edge], budget: Budget) -> Findings:
    """Return what the cycle search finds in the dependency graph ``edges`` of ``n``
    transactions (see the module docstring)."""
    g = Graph(n, edges)
    comps = {c: Component(vs) for c, vs in g.components.items()}
    _cycle_exists(g, comps)
    for c in comps.values():
        c.redundant |= _impossible_from_exists(c)
    for typ in CYCLE_TYPES:
        todo = [c for c in comps.values()
                if typ not in c.redundant and typ not in c.found and typ not in c.absent]
        if todo:
            _decide(g, typ, todo, budget)
    cycles: list[tuple[str, list[Edge]]] = []
    exists: list[tuple[str, list[int]]] = []
    unfinished = []
    for c in comps.values():
        reported, left = _replay(c)
        cycles.extend((t, [g.edges[i] for i in c.found[t]]) for t in reported)
        if left:
            exists.extend(c.exists)
            limit = sorted(set(c.unknown[t] for t in left))[0]
            unfinished.append((len(c.members), c.members[:8], left, limit))
    dep = g.sub(_WW | _WR | _RW)
    on_cycle = sorted({v for i, e in enumerate(g.edges)
                       if g.bits[i] & (_WW | _WR | _RW) and dep[e[0]] == dep[e[1]]
                       for v in e[:2]})
    return Findings(cycles, exists, unfinished, on_cycle)


def _replay(c: Component) -> tuple[list[str], list[str]]:
    """Return the classes Elle would report for the component (found ones, in order, not
    implied by an earlier one) and those left undecided that no reported one implies."""
    redundant = set(_impossible_from_exists(c))
    reported = []
    for t in CYCLE_TYPES:
        if t in c.found and t not in redundant:
            reported.append(t)
            redundant |= models.implied_anomalies([t])
    left = [t for t in CYCLE_TYPES if t in c.unknown and t not in redundant]
    return reported, left


def _record(g: Graph, c: Component, cycle: list[int]) -> str:
    """Record a cycle under its class (upgrading an undecided one); return the class."""
    cls = classify(g.kinds(cycle))
    assert cls not in c.absent, f"a {cls} cycle where the search found none"
    if cls not in c.found:
        c.found[cls] = cycle
        c.unknown.pop(cls, None)
        c.redundant |= models.implied_anomalies([cls]) - {cls}
    return cls


def _decide(g: Graph, typ: str, todo: list[Component], budget: Budget) -> None:
    base, var = split(typ)
    mask = _MASK[base] | _X[var]
    if var and not any(g.bits[i] & _X[var] for i in range(len(g.edges))):
        for c in todo:
            c.absent.add(typ)
        return
    if base == "G-single-item":
        cands = _single(g, typ, mask, todo, budget)
    elif base == "G-nonadjacent-item":
        cands = _nonadjacent(g, mask, todo)
    else:
        anchor = {"G0": _X[var] or _WW, "G1c": _X[var] or _WR, "G2-item": _RW}[base]
        cands = _anchored(g, mask, anchor, todo)
    for c in todo:
        if typ in c.redundant or typ in c.found:
            continue
        cyc = cands.get(id(c), None)
        if cyc == "unknown":
            c.unknown[typ] = budget.hit or "steps"
            continue
        if cyc is None:
            c.absent.add(typ)
            continue
        if _is_simple(g, cyc) and (_record(g, c, cyc) == typ or typ in c.redundant):
            continue
        try:  # the test's cycle is of another class: enumerate
            found = _dfs(g, c, typ, mask, budget)
        except OutOfBudget:
            c.unknown[typ] = budget.hit or "steps"
            continue
        if found is None:
            c.absent.add(typ)
        else:
            _record(g, c, found)


def _is_simple(g: Graph, cycle: list[int]) -> bool:
    verts = [g.edges[i][0] for i in cycle]
    return len(set(verts)) == len(verts)


def _comp_of(g: Graph, todo: list[Component]) -> dict[int, Component]:
    return {g.comp[c.members[0]]: c for c in todo}


def _anchored(g: Graph, mask: int, anchor: int, todo: list[Component]
              ) -> dict[int, Any]:
    """Per component: the shortest cycle through its first ``anchor`` edge that lies in
    a strongly connected component of the ``mask`` edges, or None: no cycle of the
    ``mask`` edges has an ``anchor`` edge."""
    sub = g.sub(mask)
    by = _comp_of(g, todo)
    out: dict[int, Any] = {}
    done: set[int] = set()
    for i, e in enumerate(g.edges):
        if not g.bits[i] & anchor or not g.bits[i] & mask:
            continue
        c = by.get(g.comp[e[0]])
        if c is None or g.comp[e[0]] in done or sub[e[0]] != sub[e[1]]:
            continue
        path = g.path(e[1], e[0], mask, sub)
        assert path is not None
        out[id(c)] = [i, *path]
        done.add(g.comp[e[0]])
    return out


def _single(g: Graph, typ: str, mask: int, todo: list[Component], budget: Budget
            ) -> dict[int, Any]:
    """Per component: a cycle of one rw edge a -> b and a shortest path b ~> a over the
    other ``mask`` edges, None if there is none, "unknown" if the budget ran out."""
    flow = mask & ~_RW
    reach = _Reach(g, flow)
    by = _comp_of(g, todo)
    out: dict[int, Any] = {}
    stopped: set[int] = set()
    for i, e in enumerate(g.edges):
        if g.bits[i] != _RW:
            continue
        cid = g.comp[e[0]]
        c = by.get(cid)
        if c is None or id(c) in out or cid in stopped:
            continue
        try:
            ok = reach.query(e[1], e[0], budget)
        except OutOfBudget:
            out[id(c)] = "unknown"
            stopped.add(cid)
            continue
        if ok:
            path = g.path(e[1], e[0], flow)
            assert path is not None
            out[id(c)] = [i, *path]
    return out


class _Reach:
    """Reachability over the ``mask`` edges: the condensation (Tarjan), its longest-path
    levels from the sources and to the sinks, and a depth-first search pruned by them."""

    def __init__(self, g: Graph, mask: int) -> None:
        self.cid = cid = g.sub(mask)
        k = max(cid) + 1 if cid else 0
        succ: list[set[int]] = [set() for _ in range(k)]
        for i, e in enumerate(g.edges):
            if g.bits[i] & mask and cid[e[0]] != cid[e[1]]:
                succ[cid[e[0]]].add(cid[e[1]])
        self.succ = [sorted(s, reverse=True) for s in succ]
        # Tarjan ids are a reverse topological order: an edge goes to a smaller id
        self.down = [0] * k  # longest path to a sink
        for x in range(k):
            for y in self.succ[x]:
                self.down[x] = max(self.down[x], self.down[y] + 1)
        self.up = [0] * k  # longest path from a source
        for x in range(k - 1, -1, -1):
            for y in self.succ[x]:
                self.up[y] = max(self.up[y], self.up[x] + 1)
        self.stamp = [0] * k
        self.query_no = 0

    def query(self, src: int, dst: int, budget: Budget) -> bool:
        """Return whether dst is reachable from src (raises OutOfBudget)."""
        a, b = self.cid[src], self.cid[dst]
        if a == b:
            return True
        up, down = self.up, self.down
        if a < b or up[a] >= up[b] or down[a] <= down[b]:
            return False
        self.query_no += 1
        q = self.query_no
        stack = [a]
        self.stamp[a] = q
        steps = 0
        while stack:
            x = stack.pop()
            for y in self.succ[x]:
                steps += 1
                if y < b:
                    break  # sorted descending: the rest are later still
                if y == b:
                    budget.spend(steps)
                    return True
                if self.stamp[y] == q or up[y] >= up[b] or down[y] <= down[b]:
                    continue
                self.stamp[y] = q
                stack.append(y)
            if steps > 4096:
                if not budget.spend(steps):
                    raise OutOfBudget
                steps = 0
        if not budget.spend(steps):
            raise OutOfBudget
        return False


def _nonadjacent(g: Graph, mask: int, todo: list[Component]) -> dict[int, Any]:
    """Per component: a cycle with no two rw edges in a row taken from a closed walk of
    the (transaction, last edge was rw) state graph (None: there is no such walk with a
    rw edge; a walk that does not reduce to a simple cycle of its kind is returned as
    it is, for the caller to see it is not one)."""
    flow = mask & ~_RW
    n = g.n
    hout: list[list[tuple[int, int]]] = [[] for _ in range(2 * n)]
    for i, e in enumerate(g.edges):
        s, d = e[0], e[1]
        if g.bits[i] & flow:
            hout[2 * s].append((2 * d, i))
            hout[2 * s + 1].append((2 * d, i))
        elif g.bits[i] == _RW and mask & _RW:
            hout[2 * s].append((2 * d + 1, i))
    hcomp = tarjan(2 * n, [[w for w, _ in out] for out in hout])
    by = _comp_of(g, todo)
    out: dict[int, Any] = {}
    for i, e in enumerate(g.edges):
        if g.bits[i] != _RW:
            continue
        c = by.get(g.comp[e[0]])
        a, b = 2 * e[0], 2 * e[1] + 1
        if c is None or id(c) in out or hcomp[a] != hcomp[b]:
            continue
        walk = _hpath(hout, hcomp, b, a)
        assert walk is not None
        out[id(c)] = _simple(g, [i, *walk])
    return out


def _hpath(hout: list[list[tuple[int, int]]], hcomp: list[int], src: int, dst: int
           ) -> list[int] | None:
    parent: dict[int, tuple[int, int]] = {src: (-1, -1)}
    queue = deque([src])
    while queue:
        v = queue.popleft()
        if v == dst:
            out = []
            while v != src:
                u, i = parent[v]
                out.append(i)
                v = u
            return out[::-1]
        for w, i in hout[v]:
            if w not in parent and hcomp[w] == hcomp[src]:
                parent[w] = (v, i)
                queue.append(w)
    return None


def _valid_nonadjacent(kinds: list[int]) -> bool:
    rw = [k == RW for k in kinds]
    return any(rw) and not any(rw[i] and rw[i - 1] for i in range(len(rw)))


def _simple(g: Graph, walk: list[int]) -> list[int]:
    """Return a simple cycle with no two rw edges in a row (and one at least) held by a
    closed walk of that kind, splitting it where it repeats a vertex; the walk as it is
    when no part of it is one."""
    while True:
        verts = [g.edges[i][0] for i in walk]
        first: dict[int, int] = {}
        rep = None
        for j, v in enumerate(verts):
            if v in first:
                rep = (first[v], j)
                break
            first[v] = j
        if rep is None:
            return walk
        i, j = rep
        inner = walk[i:j]
        outer = walk[j:] + walk[:i]
        if _valid_nonadjacent(g.kinds(inner)):
            walk = inner
        elif _valid_nonadjacent(g.kinds(outer)):
            walk = outer
        else:
            return walk


def _dfs(g: Graph, c: Component, typ: str, mask: int, budget: Budget) -> list[int] | None:
    """Return a simple cycle of class ``typ`` in the component, or None if there is none:
    every simple cycle is enumerated once, from its smallest vertex (raises OutOfBudget)."""
    members = c.members
    limit = min(DFS_STEPS, max(budget.steps, 0))
    spent = 0
    for s in members:
        # only vertices above s that can reach s over mask edges can lie on its cycles
        back = _reaching(g, s, mask)
        stack: list[tuple[int, int]] = [(s, 0)]
        path: list[int] = []
        on_path = {s}
        while stack:
            v, k = stack[-1]
            out = g.out[v]
            if k >= len(out):
                stack.pop()
                if path:
                    on_path.discard(v)
                    path.pop()
                continue
            stack[-1] = (v, k + 1)
            i = out[k]
            spent += 1
            if spent % 4096 == 0 and (spent > limit or not budget.spend(4096)):
                budget.hit = budget.hit or "steps"
                raise OutOfBudget
            if not g.bits[i] & mask:
                continue
            w = g.edges[i][1]
            if w == s:
                cyc = [*path, i]
                if classify(g.kinds(cyc)) == typ:
                    budget.spend(spent % 4096)
                    return cyc
                continue
            if w < s or w in on_path or w not in back or not _may_extend(g, path, i, typ):
                continue
            path.append(i)
            on_path.add(w)
            stack.append((w, 0))
    budget.spend(spent % 4096)
    return None


def _may_extend(g: Graph, path: list[int], i: int, typ: str) -> bool:
    """Whether a path may go on with edge i and still close as a ``typ`` cycle."""
    base, _ = split(typ)
    if g.bits[i] != _RW:
        return True
    n_rw = sum(1 for j in path if g.bits[j] == _RW)
    if base == "G-single-item":
        return n_rw == 0
    if base == "G-nonadjacent-item":
        return not path or g.bits[path[-1]] != _RW
    return True


def _reaching(g: Graph, s: int, mask: int) -> set[int]:
    """Return the vertices of s's component not below s that reach s over ``mask``."""
    into: dict[int, list[int]] = {}
    comp = g.comp[s]
    for v in g.components[comp]:
        for i in g.out[v]:
            if g.bits[i] & mask:
                into.setdefault(g.edges[i][1], []).append(v)
    seen = {s}
    todo = [s]
    while todo:
        for u in into.get(todo.pop(), ()):
            if u >= s and u not in seen:
                seen.add(u)
                todo.append(u)
    return seen


# -- Elle's "cycle exists" tests ------------------------------------------------------------

def _cycle_exists(g: Graph, comps: dict[int, Component]) -> None:
    """Add to each component the models a cycle of its proves impossible, in Elle's spec
    order, skipping models an earlier case already rules out."""
    per_spec: list[dict[int, list[int]]] = []
    for _model, mask, ext in EXISTS_SPECS:
        per_spec.append(_smallest_cycle_sets(g, mask, ext))
    for cid, c in comps.items():
        redundant: set[str] = set()
        for (model, _mask, _ext), found in zip(EXISTS_SPECS, per_spec, strict=True):
            if model in redundant or cid not in found:
                continue
            c.exists.append((f"{model}-cycle-exists", found[cid]))
            redundant |= models.models_implying([model])


def _smallest_cycle_sets(g: Graph, mask: int, extension: bool) -> dict[int, list[int]]:
    """Per component of the whole graph: the vertices of its smallest strongly connected
    component (of more than one vertex) in the graph of ``mask`` edges, or with
    ``extension`` in the walk graph where rw edges may follow ``mask`` edges only."""
    if not extension:
        sub = g.sub(mask)
        members: dict[int, set[int]] = {}
        for i, e in enumerate(g.edges):
            if g.bits[i] & mask and sub[e[0]] == sub[e[1]]:
                members.setdefault(sub[e[0]], set()).update(e[:2])
    else:
        n = g.n
        hout: list[list[int]] = [[] for _ in range(2 * n)]
        for i, e in enumerate(g.edges):
            s, d = e[0], e[1]
            if g.bits[i] & mask:
                hout[2 * s].append(2 * d)
                hout[2 * s + 1].append(2 * d)
            elif g.bits[i] == _RW:
                hout[2 * s].append(2 * d + 1)
        hcomp = tarjan(2 * n, hout)
        members = {}
        for v in range(2 * n):
            for w in hout[v]:
                if hcomp[v] == hcomp[w]:
                    members.setdefault(hcomp[v], set()).update((v // 2, w // 2))
    out: dict[int, list[int]] = {}
    for vs in members.values():
        cid = g.comp[next(iter(vs))]
        if cid not in out or len(vs) < len(out[cid]):
            out[cid] = sorted(vs)
    return out


def _impossible_from_exists(c: Component) -> set[str]:
    """Return the cycle classes the component's cycle-exists cases prove absent (those a
    model with no forbidden cycle here forbids)."""
    impossible = models.models_implying([t.removesuffix("-cycle-exists") for t, _ in c.exists])
    spec_models = {m for m, _, _ in EXISTS_SPECS}
    possible = spec_models - impossible
    return set(CYCLE_TYPES) & models.prohibited_by(possible) if possible else set()


# -- snapshot isolation when some appends' order is not known -------------------------------

def _hcomp(n: int, edges: list[Edge]) -> tuple[list[list[int]], list[int]]:
    hout: list[list[int]] = [[] for _ in range(2 * n)]
    for s, d, k, *_ in edges:
        if k in (WW, WR):
            hout[2 * s].append(2 * d)
            hout[2 * s + 1].append(2 * d)
        elif k == RW:
            hout[2 * s].append(2 * d + 1)
    return hout, tarjan(2 * n, hout)


def si_cycle(n: int, edges: list[Edge]) -> bool:
    """Return whether the ww/wr/rw edges hold a cycle snapshot isolation forbids: a closed
    walk with no two rw edges in a row (G0, G1c, G-single, G-nonadjacent)."""
    hout, hcomp = _hcomp(n, edges)
    return any(hcomp[v] == hcomp[w] for v in range(2 * n) for w in hout[v])


def _on_si_cycle(n: int, edges: list[Edge], added: list[Edge]) -> set[str]:
    """Return the keys of the ``added`` ww edges that lie on a cycle snapshot isolation
    forbids in ``edges`` + ``added``."""
    _, hcomp = _hcomp(n, edges + added)
    return {e[3] for e in added if hcomp[2 * e[0]] == hcomp[2 * e[1]]
            or hcomp[2 * e[0] + 1] == hcomp[2 * e[1]]}


def topo_ranks(txns: Any, edges: list[Edge]) -> list[tuple[int, int, int]]:
    """Return each transaction's place in a topological order of the ww and wr edges
    (acyclic where snapshot isolation is still possible) that follows the order of the
    strongly connected components of all dependencies (ww, wr, rw) and, among those
    free, earlier completions (an unknown one's invoke) first: the likely commit order (a
    serializable history's serial order; under snapshot isolation a commit precedes its
    completion)."""
    import heapq

    n = len(txns)
    indeg = [0] * n
    out: list[list[int]] = [[] for _ in range(n)]
    dep: list[list[int]] = [[] for _ in range(n)]
    for s, d, k, *_ in edges:
        if k in (WW, WR):
            out[s].append(d)
            indeg[d] += 1
        if k in (WW, WR, RW):
            dep[s].append(d)
    comp = tarjan(n, dep)  # a component's successors have smaller ids

    def key(x: int) -> tuple[int, int, int]:
        # an unknown transaction committed, if at all, after its invoke: in a serial
        # history before the next one's invoke
        done = txns[x].complete
        return (-comp[x], done if done >= 0 else max(txns[x].invoke, 0), x)

    heap = [key(x) for x in range(n) if indeg[x] == 0]
    heapq.heapify(heap)
    rank = [(2**62, 0, x) for x in range(n)]
    nxt = 0
    while heap:
        *_, x = heapq.heappop(heap)
        rank[x] = (nxt, 0, x)
        nxt += 1
        for y in out[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                heapq.heappush(heap, key(y))
    return rank


def si_completion(n: int, edges: list[Edge], unread: dict[str, list[int]],
                  rank: list[tuple[int, int, int]], budget: Budget) -> str:
    """Decide snapshot isolation where the order of some appends is not known: ``unread``
    per key the committed transactions whose appends to it no read shows (they come
    after every element read, in some order). Snapshot isolation is possible iff some
    order of each key's unread appenders (a ww chain) leaves no cycle it forbids; adding
    edges only adds cycles, so a key's orders are tried one at a time, pruning as soon
    as a cycle appears, the likely order (``rank``: see ``topo_ranks``) first. Return
    "possible", "impossible" or "unknown" (the budget ran out)."""
    from itertools import permutations

    base = [e for e in edges if e[2] in (WW, WR, RW)]
    dep: list[list[int]] = [[] for _ in range(n)]
    for e in base:
        dep[e[0]].append(e[1])
    comp = tarjan(n, dep)
    if len(set(comp)) == n:
        return "possible"  # no dependency cycle at all: chains in a topological order add none
    keys = sorted(unread, key=lambda k: -len(unread[k]))

    def chain(ts: tuple[int, ...], k: str) -> list[Edge]:
        return [(a, b, WW, k, None, None) for a, b in pairwise(ts)]

    def likely(k: str) -> tuple[int, ...]:
        return tuple(sorted(unread[k], key=lambda t: rank[t]))

    def orders(k: str) -> list[tuple[int, ...]]:
        first = likely(k)
        if len(first) > MAX_ORDERED:
            return [first]
        return [first, *(p for p in permutations(first) if p != first)]

    def spend() -> None:
        if not budget.spend(len(base) + 2 * n):
            raise OutOfBudget

    def go(i: int, added: list[Edge]) -> bool:
        if i == len(keys):
            return True
        k = keys[i]
        for order in orders(k):
            more = added + chain(order, k)
            spend()
            if not si_cycle(n, base + more) and go(i + 1, more):
                return True
        if len(unread[k]) > MAX_ORDERED:
            raise OutOfBudget  # too many orders to try
        return False

    try:
        # the likely order of every key at once; then, for the keys whose order closes a
        # forbidden cycle, their other orders one key at a time; then every combination
        current = {k: likely(k) for k in keys}
        for _ in range(len(keys) + 1):
            spend()
            added = [e for k in keys for e in chain(current[k], k)]
            bad = _on_si_cycle(n, base, added)
            if not bad:
                return "possible"
            k = min(bad, key=keys.index)
            others = [e for j in keys if j != k for e in chain(current[j], j)]
            for order in orders(k)[1:]:
                spend()
                if not si_cycle(n, base + others + chain(order, k)):
                    current[k] = order
                    break
            else:
                break
        return "possible" if go(0, []) else "impossible"
    except OutOfBudget:
        return "unknown"
