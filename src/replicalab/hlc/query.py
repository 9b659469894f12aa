"""A small query language over consistent cuts, in the style of Retroscope's RQL (seed 002).

    SELECT x FROM log WHEN EXISTS v IN x : v >= 5
    SELECT x, y FROM log WHEN FORALL v IN x : v < 10
    COMPUTE GLOBAL sum := SUM(x) WHEN sum > 5
    SELECT * FROM log BETWEEN 1700000000000000 AND 1700000001000000 WHEN 3 IN x UNION y

A variable name (a *field*) stands for the multiset of its values on the nodes where it is set
in the cut; ``x@n1`` is its value on node ``n1`` alone.  Fields are used through quantifiers
(EXISTS, FORALL), aggregates (SUM, AVG, MIN, MAX, COUNT), membership (``IN``, ``NOT IN``) and set
operations (UNION, INTERSECT, MINUS, ``{1, 2}`` literals); scalars combine with arithmetic,
comparisons and AND/OR/NOT.  ``COMPUTE GLOBAL name := expr`` defines a value per cut that later
globals, WHEN and the result can use.  ``BETWEEN t1 AND t2`` keeps cuts whose HLC ``l`` (µs)
lies in ``[t1, t2]``.  An undefined value (MIN of no values, a node without the variable)
compares false and makes arithmetic undefined.

The grammar is parsed with lark (LALR).  Syntax errors and unknown fields raise QueryError whose
message names the position ``line:column`` and what was expected or known.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from replicalab.hlc.clock import Timestamp
from replicalab.hlc.cuts import Cut

GRAMMAR = r"""
query: head clause*
head: select [compute] | compute
select: "SELECT"i (STAR | NAME ("," NAME)*)
compute: "COMPUTE"i gdef ("," gdef)*
gdef: "GLOBAL"i NAME ":=" expr
?clause: "FROM"i NAME                   -> from_
       | "BETWEEN"i INT "AND"i INT      -> between
       | "WHEN"i expr                   -> when

?expr: or_expr
?or_expr: and_expr | or_expr "OR"i and_expr      -> or_
?and_expr: not_expr | and_expr "AND"i not_expr   -> and_
?not_expr: "NOT"i not_expr                       -> not_
         | QUANT NAME "IN"i setx ":" expr        -> quant
         | cmp
?cmp: setx
    | setx CMP setx                  -> compare
    | setx "IN"i setx                -> member
    | setx "NOT"i "IN"i setx         -> not_member
?setx: arith | setx SETOP arith      -> setop
?arith: term | arith ADDOP term      -> binop
?term: factor | term MULOP factor    -> binop
?factor: "-" factor                  -> neg
       | atom
?atom: NUMBER                        -> number
     | STRING                        -> string
     | "TRUE"i                       -> true
     | "FALSE"i                      -> false
     | NAME                          -> name
     | NAME "@" (NAME | STRING)      -> at
     | NAME "(" expr ")"             -> agg
     | "{" [expr ("," expr)*] "}"    -> setlit
     | "(" expr ")"

QUANT.2: /(EXISTS|FORALL)\b/i
SETOP.2: /(UNION|INTERSECT|MINUS)\b/i
CMP: ">=" | "<=" | "!=" | "<>" | "==" | "=" | ">" | "<"
ADDOP: "+" | "-"
MULOP: "*" | "/" | "%"
STAR: "*"
NAME: /[A-Za-z_][A-Za-z0-9_.]*/
INT: /[0-9]+/
NUMBER: /[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/
STRING: /"[^"\n]*"|'[^'\n]*'/
COMMENT: /--[^\n]*/
%import common.WS
%ignore WS
%ignore COMMENT
"""

# Names shown for terminals in "expected ..." messages.
_FRIENDLY = {"NAME": "a name", "NUMBER": "a number", "INT": "an integer", "STRING": "a string",
             "QUANT": "EXISTS/FORALL",
             "SETOP": "UNION/INTERSECT/MINUS", "CMP": "a comparison (< <= = != >= >)",
             "ADDOP": "+ or -", "MULOP": "* / %", "STAR": "*", "$END": "end of query"}

_PARSER = Lark(GRAMMAR, start=["query", "expr"], parser="lalr", maybe_placeholders=True)
_TERMINALS = {t.name: t.pattern.value for t in _PARSER.terminals}

AGGREGATES = ("SUM", "AVG", "MIN", "MAX", "COUNT")
SCALAR = "scalar"
SET = "set"


class QueryError(ValueError):
    """A query that cannot run: syntax error (with line:column), unknown field, type error."""


Env = dict[str, Any]  # bound names (quantifier variables, globals) -> values
_Eval = Callable[[Cut, Env], Any]


@dataclass(frozen=True)
class _Compiled:
    kind: str  # SCALAR or SET
    fn: _Eval


@dataclass(frozen=True)
class FieldRef:
    """A field named in a query, with its position (1-based line and column)."""

    name: str
    line: int
    column: int
    where: str = "query"  # which text the position refers to: "query" or "severity"


@dataclass(frozen=True)
class Match:
    """A cut that satisfied the query: HLC time (``l`` in µs), selected per-node values, globals."""

    time: Timestamp
    values: dict[str, dict[str, Any]]
    globals: dict[str, Any]
    severity: Any = None  # the query's severity expression on this cut, when it has one

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict: ``l_us``, ``c``, ``values``, ``globals`` (``severity``)."""
        out = {"l_us": self.time.l, "c": self.time.c, "values": self.values,
               "globals": self.globals}
        if self.severity is not None:
            out["severity"] = self.severity
        return out


@dataclass
class Query:
    """A compiled query; ``select`` None means every field (``SELECT *``)."""

    text: str
    select: list[str] | None
    globals: list[tuple[str, _Compiled]]
    when: _Compiled | None
    between_us: tuple[int, int] | None
    source: str | None
    fields: list[FieldRef] = field(default_factory=list)
    severity: Expr | None = None

    def with_severity(self, text: str) -> Query:
        """Set (and return self with) a severity expression evaluated on every match; it may use
        fields and this query's globals.  Raises QueryError on a syntax or type error."""
        try:
            expr = parse_expr(text, [n for n, _ in self.globals])
        except QueryError as e:
            raise QueryError(f"severity: {e}") from None
        if expr.compiled.kind != SCALAR:
            raise QueryError(f"severity {text!r} must be a single number, not a per-node set; "
                             "use an aggregate such as MAX(x)")
        self.severity = expr
        self.fields.extend(FieldRef(f.name, f.line, f.column, "severity") for f in expr.fields)
        return self

    def check(self, known: Iterable[str]) -> None:
        """Raise QueryError naming the first field not in ``known`` and listing the known ones."""
        known_set = set(known)
        for ref in self.fields:
            if ref.name not in known_set:
                listed = ", ".join(sorted(known_set)) or "none (the logs have no vars)"
                where = "" if ref.where == "query" else f" of the {ref.where}"
                raise QueryError(f"unknown field {ref.name!r} at {ref.line}:{ref.column}{where};"
                                 f" known fields: {listed}")

    def match(self, cut: Cut) -> Match | None:
        """Return the Match for ``cut`` if it passes BETWEEN and WHEN, else None."""
        if self.between_us is not None:
            lo, hi = self.between_us
            if not lo <= cut.time.l <= hi:
                return None
        env: Env = {}
        for name, g in self.globals:
            env[name] = g.fn(cut, env)
        if self.when is not None and not _truth(self.when.fn(cut, env)):
            return None
        names = self.select if self.select is not None else sorted(
            {v for s in cut.state.values() for v in s})
        sev = self.severity.evaluate(cut, env) if self.severity is not None else None
        return Match(cut.time, {n: cut.values(n) for n in names}, dict(env), sev)

    def run(self, cuts: Iterable[Cut]) -> Iterator[Match]:
        """Yield the Match of every cut in ``cuts`` that satisfies the query, in order."""
        for cut in cuts:
            m = self.match(cut)
            if m is not None:
                yield m


@dataclass
class Expr:
    """A compiled stand-alone expression (e.g. a sonification severity)."""

    text: str
    compiled: _Compiled
    fields: list[FieldRef]

    def evaluate(self, cut: Cut, env: Env | None = None) -> Any:
        """Return the expression's value on ``cut`` with ``env`` bound (e.g. a Match's globals)."""
        return self.compiled.fn(cut, dict(env or {}))


def parse_query(text: str) -> Query:
    """Return the compiled query; raises QueryError on a syntax or type error."""
    tree = _parse(text, "query")
    c = _Compiler()
    head = tree.children[0]
    select: list[str] | None = []
    gdefs: list[Tree] = []
    for part in head.children:
        if part is None:
            continue
        if part.data == "select":
            toks = [t for t in part.children if isinstance(t, Token)]
            if any(t.type == "STAR" for t in toks):
                select = None
            else:
                select = [str(t) for t in toks]
                c.fields.extend(FieldRef(str(t), t.line, t.column) for t in toks)
        else:
            gdefs = list(part.children)
    globals_: list[tuple[str, _Compiled]] = []
    for g in gdefs:
        name_tok, body = g.children
        name = str(name_tok)
        if name in c.scope or name in (n for n, _ in globals_):
            raise QueryError(f"GLOBAL {name} defined twice at {name_tok.line}:{name_tok.column}")
        globals_.append((name, c.compile(body)))
        c.scope[name] = SCALAR if globals_[-1][1].kind == SCALAR else SET
    when: _Compiled | None = None
    between: tuple[int, int] | None = None
    source: str | None = None
    for clause in tree.children[1:]:
        first = clause.children[0]
        line, col = _pos(first)
        if clause.data == "when":
            if when is not None:
                raise QueryError(f"a second WHEN at {line}:{col}; join conditions with AND")
            when = c.compile(first)
            if when.kind != SCALAR:
                raise QueryError(f"WHEN at {line}:{col} needs a condition, not a set of values;"
                                 " use EXISTS/FORALL, IN or an aggregate")
        elif clause.data == "between":
            if between is not None:
                raise QueryError(f"a second BETWEEN at {line}:{col}")
            lo, hi = int(clause.children[0]), int(clause.children[1])
            if lo > hi:
                raise QueryError(f"BETWEEN {lo} AND {hi} at {line}:{col} is empty; "
                                 "give the earlier HLC time first")
            between = (lo, hi)
        else:
            source = str(first)
    return Query(text, select, globals_, when, between, source, c.fields)


def parse_expr(text: str, globals_: Iterable[str] = ()) -> Expr:
    """Return a compiled expression that may use fields and the names in ``globals_``."""
    tree = _parse(text, "expr")
    c = _Compiler()
    c.scope.update(dict.fromkeys(globals_, SCALAR))
    return Expr(text, c.compile(tree), c.fields)


def _parse(text: str, start: str) -> Tree:
    try:
        return _PARSER.parse(text, start=start)
    except UnexpectedInput as e:
        raise QueryError(_syntax_message(text, e)) from None


def _describe(names: Iterable[str]) -> str:
    out = set()
    for n in names:
        if n in _FRIENDLY:
            out.add(_FRIENDLY[n])
        elif n in _TERMINALS:
            out.add(repr(_TERMINALS[n]).replace("\\\\", "\\"))
        else:
            out.add(n)
    return ", ".join(sorted(out))


def _syntax_message(text: str, e: UnexpectedInput) -> str:
    if isinstance(e, UnexpectedEOF):
        lines = text.split("\n")
        line, col = len(lines), len(lines[-1]) + 1
        return (f"syntax error at {line}:{col}: unexpected end of query; "
                f"expected {_describe(e.expected)}")
    if isinstance(e, UnexpectedCharacters):
        got = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "end"
        return (f"syntax error at {e.line}:{e.column}: unexpected character {got!r}; "
                f"expected {_describe(e.allowed)}")
    assert isinstance(e, UnexpectedToken)
    tok = e.token
    got = "end of query" if tok.type == "$END" else repr(str(tok))
    line, col = (e.line, e.column) if tok.type != "$END" else (
        text.count("\n") + 1, len(text.split("\n")[-1]) + 1)
    expected = e.accepts or e.expected
    return f"syntax error at {line}:{col}: unexpected {got}; expected {_describe(expected)}"


def _pos(node: Tree | Token) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.line or 0, node.column or 0
    for child in node.children:
        if isinstance(child, (Tree, Token)):
            return _pos(child)
    return 0, 0


def _truth(v: Any) -> bool:
    return bool(v) if v is not None else False


def _unique(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _safe_cmp(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def cmp(a: Any, b: Any) -> bool:
        if a is None or b is None:
            return False
        try:
            return bool(op(a, b))
        except TypeError:
            return False  # e.g. a string against a number: not comparable, so not true
    return cmp


_CMPS = {">=": operator.ge, "<=": operator.le, "!=": operator.ne, "<>": operator.ne,
         "==": operator.eq, "=": operator.eq, ">": operator.gt, "<": operator.lt}
_CMP_FNS = {k: _safe_cmp(v) for k, v in _CMPS.items()}


def _arith(op: str, a: Any, b: Any) -> Any:
    if not (_num(a) and _num(b)):
        return None
    if op in "/%" and b == 0:
        return None
    return {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
            "%": operator.mod}[op](a, b)


def _aggregate(name: str, values: list[Any]) -> Any:
    if name == "COUNT":
        return len(values)
    nums = [v for v in values if _num(v)]
    if name == "SUM":
        return sum(nums)
    if not nums:
        return None
    if name == "AVG":
        return sum(nums) / len(nums)
    return min(nums) if name == "MIN" else max(nums)


class _Compiler:
    """Turns a parse tree into closures over (cut, env), checking set/scalar types."""

    def __init__(self) -> None:
        self.scope: dict[str, str] = {}  # bound names -> kind
        self.fields: list[FieldRef] = []

    def compile(self, node: Tree | Token) -> _Compiled:
        if isinstance(node, Token):  # only from "(" expr ")" collapsing to a bare token
            raise QueryError(f"unexpected {node!s} at {node.line}:{node.column}")
        method = getattr(self, "_" + node.data.rstrip("_"))
        return method(node)

    def _scalar(self, node: Tree | Token, what: str) -> _Compiled:
        c = self.compile(node)
        if c.kind != SCALAR:
            line, col = _pos(node)
            raise QueryError(f"{what} at {line}:{col} needs a single value, not a per-node set;"
                             " use EXISTS/FORALL, an aggregate such as MAX(x), or x@node")
        return c

    def _set(self, node: Tree | Token, what: str) -> _Compiled:
        c = self.compile(node)
        if c.kind != SET:
            line, col = _pos(node)
            raise QueryError(f"{what} at {line}:{col} needs a set of values (a field, a set "
                             "operation or {...}), not a single value")
        return c

    def _number(self, node: Tree) -> _Compiled:
        text = str(node.children[0])
        v: float | int = float(text) if any(ch in text for ch in ".eE") else int(text)
        return _Compiled(SCALAR, lambda cut, env: v)

    def _string(self, node: Tree) -> _Compiled:
        v = str(node.children[0])[1:-1]
        return _Compiled(SCALAR, lambda cut, env: v)

    def _true(self, node: Tree) -> _Compiled:
        return _Compiled(SCALAR, lambda cut, env: True)

    def _false(self, node: Tree) -> _Compiled:
        return _Compiled(SCALAR, lambda cut, env: False)

    def _name(self, node: Tree) -> _Compiled:
        tok = node.children[0]
        name = str(tok)
        if name in self.scope:
            return _Compiled(self.scope[name], lambda cut, env: env.get(name))
        self.fields.append(FieldRef(name, tok.line, tok.column))
        return _Compiled(SET, lambda cut, env: list(cut.values(name).values()))

    def _at(self, node: Tree) -> _Compiled:
        tok, node_tok = node.children
        name = str(tok)
        where = str(node_tok)
        if node_tok.type == "STRING":
            where = where[1:-1]
        self.fields.append(FieldRef(name, tok.line, tok.column))
        return _Compiled(SCALAR, lambda cut, env: cut.state.get(where, {}).get(name))

    def _setlit(self, node: Tree) -> _Compiled:
        items = [self._scalar(ch, "a set element") for ch in node.children if ch is not None]
        return _Compiled(SET, lambda cut, env: _unique(i.fn(cut, env) for i in items))

    def _agg(self, node: Tree) -> _Compiled:
        tok = node.children[0]
        name = str(tok).upper()
        if name not in AGGREGATES:
            raise QueryError(f"unknown function {str(tok)!r} at {tok.line}:{tok.column}; "
                             f"known: {', '.join(AGGREGATES)}")
        arg = self._set(node.children[1], name)
        return _Compiled(SCALAR, lambda cut, env: _aggregate(name, arg.fn(cut, env)))

    def _neg(self, node: Tree) -> _Compiled:
        a = self._scalar(node.children[0], "unary minus")
        return _Compiled(SCALAR, lambda cut, env: _arith("-", 0, a.fn(cut, env)))

    def _binop(self, node: Tree) -> _Compiled:
        left, op_tok, right = node.children
        op = str(op_tok)
        a = self._scalar(left, f"operator {op}")
        b = self._scalar(right, f"operator {op}")
        return _Compiled(SCALAR, lambda cut, env: _arith(op, a.fn(cut, env), b.fn(cut, env)))

    def _setop(self, node: Tree) -> _Compiled:
        left, op_tok, right = node.children
        op = str(op_tok).upper()
        a = self._set(left, op)
        b = self._set(right, op)
        if op == "UNION":
            return _Compiled(SET, lambda cut, env: _unique([*a.fn(cut, env), *b.fn(cut, env)]))
        if op == "INTERSECT":
            return _Compiled(SET, lambda cut, env: _unique(
                v for v in a.fn(cut, env) if v in b.fn(cut, env)))
        return _Compiled(SET, lambda cut, env: _unique(
            v for v in a.fn(cut, env) if v not in b.fn(cut, env)))

    def _compare(self, node: Tree) -> _Compiled:
        left, op_tok, right = node.children
        op = str(op_tok)
        a, b = self.compile(left), self.compile(right)
        if a.kind == SET and b.kind == SET and op in ("=", "==", "!=", "<>"):
            eq = op in ("=", "==")
            return _Compiled(SCALAR, lambda cut, env: eq == _same_set(a.fn(cut, env),
                                                                      b.fn(cut, env)))
        for side, c in ((left, a), (right, b)):
            if c.kind != SCALAR:
                line, col = _pos(side)
                raise QueryError(f"comparison {op} at {line}:{col} needs a single value, not a "
                                 "per-node set; use EXISTS/FORALL, an aggregate such as MAX(x),"
                                 " or x@node")
        fn = _CMP_FNS[op]
        return _Compiled(SCALAR, lambda cut, env: fn(a.fn(cut, env), b.fn(cut, env)))

    def _member(self, node: Tree) -> _Compiled:
        a = self._scalar(node.children[0], "IN")
        s = self._set(node.children[1], "IN")
        return _Compiled(SCALAR, lambda cut, env: a.fn(cut, env) in s.fn(cut, env))

    def _not_member(self, node: Tree) -> _Compiled:
        a = self._scalar(node.children[0], "NOT IN")
        s = self._set(node.children[1], "NOT IN")
        return _Compiled(SCALAR, lambda cut, env: a.fn(cut, env) not in s.fn(cut, env))

    def _not(self, node: Tree) -> _Compiled:
        a = self._scalar(node.children[0], "NOT")
        return _Compiled(SCALAR, lambda cut, env: not _truth(a.fn(cut, env)))

    def _and(self, node: Tree) -> _Compiled:
        a = self._scalar(node.children[0], "AND")
        b = self._scalar(node.children[1], "AND")
        return _Compiled(SCALAR, lambda cut, env: _truth(a.fn(cut, env))
                         and _truth(b.fn(cut, env)))

    def _or(self, node: Tree) -> _Compiled:
        a = self._scalar(node.children[0], "OR")
        b = self._scalar(node.children[1], "OR")
        return _Compiled(SCALAR, lambda cut, env: _truth(a.fn(cut, env))
                         or _truth(b.fn(cut, env)))

    def _quant(self, node: Tree) -> _Compiled:
        q_tok, var_tok, set_node, body_node = node.children
        quant = str(q_tok).upper()
        var = str(var_tok)
        values = self._set(set_node, quant)
        saved = self.scope.get(var)
        self.scope[var] = SCALAR
        try:
            body = self._scalar(body_node, f"the body of {quant}")
        finally:
            if saved is None:
                del self.scope[var]
            else:
                self.scope[var] = saved

        def run(cut: Cut, env: Env) -> bool:
            outer = env.get(var, _MISSING)
            check = any if quant == "EXISTS" else all
            try:
                def holds(v: Any) -> bool:
                    env[var] = v
                    return _truth(body.fn(cut, env))
                return check(holds(v) for v in values.fn(cut, env))
            finally:
                if outer is _MISSING:
                    env.pop(var, None)
                else:
                    env[var] = outer
        return _Compiled(SCALAR, run)


_MISSING = object()


def _same_set(a: list[Any], b: list[Any]) -> bool:
    return all(v in b for v in a) and all(v in a for v in b)
