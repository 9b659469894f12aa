"""Every `replicalab ...` command the README and docs/**/*.md show is one the tool takes.

Found, without running anything:

* in fenced blocks (not ```python, ```toml and other non-shell blocks): every command line
  (``replicalab ...``, ``.venv/bin/replicalab ...``, after ``timeout 12`` or ``VAR=value``;
  in a block with ``$ `` prompts, only the prompted lines), every command after ``&&``,
  ``;``, ``|`` or ``$(`` on such a line, and every ```replicalab ...``` quoted in backticks
  on any line of the block (a hint in shown output); a trailing backslash continues a line.
  In a block without prompts, a line whose word after ``replicalab`` is neither a verb nor
  close to one (``clusters``) is output (`replicalab fast  62,907 req/s`), and so is such
  an inline span (`replicalab store`, a row's label);
* in the prose: every inline code span that starts with ``replicalab `` (or ``$
  replicalab``), or with a verb's name followed by an option (`load ramp --step-duration`)
  or by one of its sub-commands (`counter create|inc|dec`).

Checked against the real Typer app's command tree (the click objects ``--help`` prints
from):

* the verb exists, and the sub-command of a group (``counter bench``); alternatives written
  ``create|inc|dec``, ``run/compare`` or ``--repeats/--sweep`` each exist; a group named
  without a sub-command takes, in prose, an option any of its sub-commands has (`load
  --workers`), and on a command line nothing but ``--help``;
* every option exists for that command (``--help`` always does); an option the tool keeps
  only for old command lines (hidden from ``--help``: ``--think-ms``, ``counter bench
  --store``) is shown only where the text beside it says it is deprecated or "still works";
* a duration (an option whose ``--help`` placeholder is ``DURATION``) has a unit
  (``--duration 30`` is deprecated: ``30s``), unless the text says so;
* no more positional arguments than the command takes.

Placeholders stand where a value goes: ``URL``, ``N``, ``<run>``, ``$PG``, ``...`` (which
also stands for arguments left out); ``[--option VALUE]`` synopses are read without their
brackets. A page whose commands need a plugin says what the plugin adds in a comment,
``<!-- plugin adds: model toy-mm1; probe --rounds -->``: those names are taken as existing
on that page, nothing else. Each problem is reported as ``file:line: `command`: what is
wrong``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
NOT_SHELL = {"python", "py", "toml", "json", "yaml", "yml", "sql", "edn", "clojure", "rust",
             "go", "html", "css", "javascript", "js", "csv", "ini"}
PLACEHOLDER = "\x01"
SAYS_DEPRECATED = re.compile(r"deprecated|still works?\b|old name|with a note", re.I)
FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
PLUGIN = re.compile(r"<!--\s*plugin adds:\s*(.+?)\s*-->")
BINARY = r"(?:[\w.~/-]*/)?replicalab"
PREFIX = r"(?:(?:\w+=\S*|timeout\s+(?:-s\s+\w+\s+)?\S+|nohup|time|sudo|env|exec)\s+)*"
LINE_COMMAND = re.compile(rf"^\s*{PREFIX}{BINARY}(?=\s)")
PROMPT_COMMAND = re.compile(rf"^\s*\$\s+{PREFIX}{BINARY}(?=\s)")
AFTER_OPERATOR = re.compile(rf"(?:&&|\|\||;|\||\$\(|\()\s*{PREFIX}{BINARY}(?=\s)")
QUOTED = re.compile(rf"`(?:\$\s+)?{BINARY}(\s[^`]+)`")


@dataclass(frozen=True)
class Shown:
    """One command a doc shows: where (file, 1-based line), its text from ``replicalab``
    on, the text around it (to read "deprecated" beside it), whether it is prose (an inline
    code span), whether it may be a line of output (a block without prompts) and the names
    its page's plugin adds."""

    path: Path
    line: int
    text: str
    context: str
    inline: bool = False
    output_too: bool = False
    plugin: frozenset[str] = field(default_factory=frozenset)

    @property
    def where(self) -> str:
        path = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path.name
        return f"{path}:{self.line}"


def _logical_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join lines ending in a backslash with the next; return (first line number, text)."""
    out: list[tuple[int, str]] = []
    k = 0
    while k < len(lines):
        number, text = lines[k]
        k += 1
        while text.rstrip().endswith("\\") and k < len(lines):
            text = text.rstrip()[:-1] + " " + lines[k][1].strip()
            k += 1
        out.append((number, text))
    return out


def _plugin_names(text: str) -> frozenset[str]:
    """Return what the page's ``<!-- plugin adds: ... -->`` comments name, each entry as
    its words joined by one space (``model toy-mm1``, ``probe --rounds``)."""
    return frozenset(" ".join(entry.split()) for m in PLUGIN.finditer(text)
                     for entry in m.group(1).split(";") if entry.strip())


def commands_in(path: Path, verbs: dict[str, Any], text: str | None = None) -> list[Shown]:
    """Return the commands the Markdown file ``path`` shows (``text``: its content, read
    from ``path`` when None); ``verbs``: the tool's verbs by name (their click commands)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    plugin = _plugin_names(text)
    found: list[Shown] = []
    prose: list[tuple[int, str]] = []
    block: list[tuple[int, str]] | None = None
    fence, lang = "", ""
    for number, line in enumerate(text.splitlines(), start=1):
        m = FENCE.match(line)
        if block is None and m:
            block, fence, lang = [], m.group(1), m.group(2).lower()
            continue
        if block is not None:
            if line.strip().startswith(fence):
                if lang not in NOT_SHELL:
                    found += _block_commands(path, block, plugin)
                block = None
            else:
                block.append((number, line))
            continue
        prose.append((number, line))
    found += _inline_commands(path, prose, verbs, plugin)
    return found


def _block_commands(path: Path, block: list[tuple[int, str]],
                    plugin: frozenset[str]) -> list[Shown]:
    out = []
    lines = _logical_lines(block)
    prompted = any(re.match(r"^\s*\$\s", t) for _, t in lines)
    for number, text in lines:
        ends = []
        if prompted and re.match(r"^\s*\$\s", text):
            m = PROMPT_COMMAND.match(text)
            ends += [] if m is None else [m.end()]
            ends += [a.end() for a in AFTER_OPERATOR.finditer(text)]
        elif not prompted and (m := LINE_COMMAND.match(text)) is not None:
            ends += [m.end(), *(a.end() for a in AFTER_OPERATOR.finditer(text, m.end()))]
        out += [Shown(path, number, "replicalab" + text[e:], text, output_too=not prompted,
                      plugin=plugin) for e in ends]
        out += [Shown(path, number, "replicalab" + q.group(1), text, plugin=plugin)
                for q in QUOTED.finditer(text)]
    return out


INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _is_command_span(span: str, verbs: dict[str, Any]) -> bool:
    parts = span.split()
    if len(parts) < 2 or parts[0] not in verbs:
        return False
    subs = getattr(verbs[parts[0]], "commands", {})
    return (any(w.startswith("--") for w in parts[1:])
            or all(w in subs for w in re.split(r"[|/]", parts[1]) if w))


def _inline_commands(path: Path, prose: list[tuple[int, str]], verbs: dict[str, Any],
                     plugin: frozenset[str]) -> list[Shown]:
    """Return the commands of the inline code spans of ``prose`` (numbered lines outside
    fenced blocks; a span may run over a line break, not over a blank line)."""
    out = []
    paragraph: list[tuple[int, str]] = []
    for number, line in [*prose, (0, "")]:
        if line.strip():
            paragraph.append((number, line))
            continue
        text = "\n".join(t for _, t in paragraph)
        offsets = [0]
        for _, t in paragraph:
            offsets.append(offsets[-1] + len(t) + 1)
        for m in INLINE.finditer(text):
            span = re.sub(r"^\$\s+", "", " ".join(m.group(2).split()))
            first, _, rest = span.partition(" ")
            if re.fullmatch(BINARY, first) and rest:
                command = "replicalab " + rest
            elif _is_command_span(span, verbs):
                command = "replicalab " + span
            else:
                continue
            row = sum(1 for o in offsets[1:] if o <= m.start())
            last = sum(1 for o in offsets[1:] if o <= m.end())
            context = "\n".join(t for _, t in paragraph[row:last + 2])
            out.append(Shown(path, paragraph[row][0], command, context, inline=True,
                             output_too=True, plugin=plugin))
        paragraph = []
    return out


def words(text: str) -> list[str]:
    """Return the words of the command ``text`` as a shell would split them, up to where
    the command ends (``|``, ``&&``, ``;``, ``>``, a ``#`` comment, the end). ``<...>``
    placeholders hold :data:`PLACEHOLDER`; ``[...]`` synopsis brackets are dropped, and so
    is a ``|`` between alternatives inside them; ``a|b`` (no spaces) stays one word."""
    s = re.sub(r"<[A-Za-z][^<>]*>", PLACEHOLDER, text)
    out: list[str] = []
    cur: list[str] = []
    started = False
    quote = ""
    depth = 0
    i = 0

    def flush() -> None:
        nonlocal started
        if started:
            out.append("".join(cur))
        cur.clear()
        started = False

    while i < len(s):
        c = s[i]
        nxt = s[i + 1] if i + 1 < len(s) else ""
        i += 1
        if quote:
            if c == quote:
                quote = ""
            else:
                cur.append(c)
            continue
        if c in "'\"":
            quote, started = c, True
            continue
        if c.isspace():
            flush()
            continue
        if c == "\\" and nxt:
            cur.append(nxt)
            started = True
            i += 1
            continue
        if c == "#" and not started:
            break
        if c == "[" and not started:
            depth += 1
            continue
        if c == "]" and depth and (not nxt or nxt.isspace() or nxt in "]|"):
            depth -= 1
            flush()
            continue
        if c == "|":
            if depth or (started and nxt and not nxt.isspace()):
                if started:
                    cur.append(c)
                continue
            break
        if c in ";&<>)":
            if c == ">" and started and "".join(cur).isdigit():
                cur.clear()  # 2> log: a redirection, not a word
                started = False
            break
        cur.append(c)
        started = True
    flush()
    return out


def _is_placeholder(word: str) -> bool:
    bare = word.strip(".,:")
    return (PLACEHOLDER in word or "$" in word or word.startswith(("...", "…")) or
            bool(re.fullmatch(r"[A-Z][A-Z0-9_]*(?:[=:,.][A-Z0-9_.,=:]*)*", bare)))


def _options(command: Any) -> dict[str, Any]:
    found = {}
    for p in command.params:
        if getattr(p, "param_type_name", "") == "option":
            for o in [*p.opts, *p.secondary_opts]:
                found[o] = p
    return found


BARE_NUMBER = re.compile(r"[0-9]*\.?[0-9]+")


@dataclass
class _Check:
    """The command being checked: what is reported, its name so far and its candidates
    (one command, the alternatives shown, or every sub-command of a group named alone)."""

    shown: Shown
    head: str
    name: str
    candidates: list[Any]
    problems: list[str] = field(default_factory=list)

    def say(self, what: str) -> None:
        self.problems.append(f"{self.head}: {what}")


def problems_of(shown: Shown, root: Any, tree: dict[str, Any]) -> list[str]:
    """Return what is wrong with the command ``shown`` against the command tree: the root
    group ``root`` and ``tree``, verb name -> its click command (empty: nothing)."""
    ws = words(shown.text)
    head = f"{shown.where}: `{' '.join(ws).replace(PLACEHOLDER, '<...>')}`"
    k = 1
    while k < len(ws) and ws[k].startswith("-"):
        if ws[k] not in _options(root) and ws[k] != "--help":
            return [f"{head}: unknown option {ws[k]} of `replicalab`"]
        k += 1
    if k >= len(ws) or _is_placeholder(ws[k]):
        return []
    verb = ws[k]
    if verb not in tree:
        if shown.output_too and not difflib.get_close_matches(verb, tree, cutoff=0.7):
            return []  # a line of output that starts with the word replicalab
        return [f"{head}: unknown verb {verb!r} (the verbs: {', '.join(tree)})"]
    check = _Check(shown, head, verb, [tree[verb]])
    k = _sub_command(check, ws, k + 1)
    if check.problems or not check.candidates:
        return check.problems
    group = check.candidates[0]
    if len(check.candidates) == 1 and hasattr(group, "commands"):
        if not shown.inline and [w for w in ws[k:] if w != "--help"]:
            check.say(f"`replicalab {check.name}` needs a sub-command (one of "
                      f"{', '.join(sorted(group.commands))})")
            return check.problems
        check.candidates = list(group.commands.values())  # prose: `load --workers`
    _options_and_arguments(check, ws, k)
    return check.problems


def _sub_command(check: _Check, ws: list[str], k: int) -> int:
    """Follow the sub-commands named from ``ws[k]`` on; return the index after them."""
    while (k < len(ws) and len(check.candidates) == 1
           and hasattr(check.candidates[0], "commands") and not ws[k].startswith("-")):
        group, word = check.candidates[0], ws[k]
        k += 1
        if _is_placeholder(word):
            check.candidates = list(group.commands.values())  # any of its sub-commands
            return k
        alternatives = [w for w in re.split(r"[|/]", word) if w]
        if all(f"{check.name} {w}" in check.shown.plugin for w in alternatives):
            check.candidates = []  # a plugin's command: its options are its own
            return k
        unknown = [w for w in alternatives if w not in group.commands]
        if unknown:
            check.say(f"unknown command `replicalab {check.name} {unknown[0]}` (its "
                      f"commands: {', '.join(sorted(group.commands))})")
            return k
        check.candidates = [group.commands[w] for w in alternatives]
        check.name = f"{check.name} {word}"
    return k


def _find_option(check: _Check, option: str) -> Any:
    """Return the option's parameter in the candidates (one shown in ``--help`` first),
    True for one the page's plugin adds, None when no candidate has it."""
    found = [p for c in check.candidates if (p := _options(c).get(option)) is not None]
    found.sort(key=lambda p: bool(getattr(p, "hidden", False)))
    if found:
        return found[0]
    return f"{check.name.split()[0]} {option}" in check.shown.plugin or None


def _options_and_arguments(check: _Check, ws: list[str], k: int) -> None:
    positionals, elided = 0, False
    while k < len(ws):
        word = ws[k]
        k += 1
        if word.startswith(("...", "…")):
            elided = True
            continue
        if not word.startswith("-") or word == "-" or re.fullmatch(r"-[0-9.]+", word):
            positionals += "$" not in word  # $args may expand to options
            continue
        option, eq, value = word.partition("=")
        params = []
        for alternative in option.split("/"):
            if alternative == "--help":
                continue
            param = _find_option(check, alternative)
            if param is None:
                check.say(f"unknown option {alternative} of `replicalab {check.name}`")
            if param is None or param is True:  # unknown, or a plugin's: its value is not
                if not eq and k < len(ws) and not ws[k].startswith("-"):  # an argument
                    k += 1
            elif param is not True:
                params.append((alternative, param))
        if len(params) != 1:
            continue
        option, param = params[0]
        if getattr(param, "hidden", False) and not SAYS_DEPRECATED.search(check.shown.context):
            check.say(f"{option} is deprecated (hidden from `replicalab {check.name} --help`);"
                      " show the option that replaces it")
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            continue
        if not eq:
            if k >= len(ws) or ws[k].startswith("--"):
                continue  # a synopsis naming the option alone
            value = ws[k]
            k += 1
        _value(check, option, param, value)
    if not elided and len(check.candidates) == 1:
        arguments = [p for p in check.candidates[0].params
                     if getattr(p, "param_type_name", "") == "argument"]
        takes = sum(a.nargs for a in arguments if a.nargs > 0)
        if positionals > takes and not any(a.nargs < 0 for a in arguments):
            check.say(f"`replicalab {check.name}` takes {takes} argument(s), the docs give "
                      f"{positionals}")


def _value(check: _Check, option: str, param: Any, value: str) -> None:
    if _is_placeholder(value):
        return
    if (param.metavar == "DURATION" and BARE_NUMBER.fullmatch(value) and float(value) != 0
            and not SAYS_DEPRECATED.search(check.shown.context)):
        check.say(f"{option} {value}: a duration needs its unit ({value}s, {value}ms ...); "
                  "bare numbers are deprecated")


@pytest.fixture(scope="module")
def tool() -> tuple[Any, dict[str, Any]]:
    """The root click group and every verb's click command, as the installed tool has them."""
    import typer.main

    from replicalab.cli.main import VERBS, load_verb, typer_app

    root = typer.main.get_command(typer_app())
    return root, {v.name: load_verb(v.name) for v in VERBS}


def _all_shown(tree: dict[str, Any]) -> list[Shown]:
    return [s for path in DOCS for s in commands_in(path, tree)]


def test_every_command_the_docs_show_is_one_the_tool_takes(tool: tuple[Any, dict]) -> None:
    root, tree = tool
    shown = _all_shown(tree)
    # the finder finds: the README's tour alone shows dozens of commands
    assert len(shown) > 300, len(shown)
    assert sum(s.path.name == "README.md" for s in shown) > 40
    found = [p for s in shown for p in problems_of(s, root, tree)]
    assert not found, f"{len(found)} documented commands the tool does not take:\n" + \
        "\n".join(found)


def test_the_runnable_blocks_are_among_the_commands_checked(tool: tuple[Any, dict]) -> None:
    _, tree = tool
    shown = {(s.path, s.line) for s in _all_shown(tree)}
    marked = 0
    for path in DOCS:
        inside: bool | None = False
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"^<!--\s*runnable", line.strip()):
                inside = None  # the fence on the next line opens the block
            elif inside is None:
                inside = line.startswith("```")
            elif inside and line.startswith("```"):
                inside = False
            elif inside and re.match(r"^\$?\s*(?:\.venv/bin/)?replicalab\s", line):
                marked += 1
                assert (path, number) in shown, f"{path.name}:{number} {line}"
    assert marked >= 20, marked


DRIFTED = """\
Intro with `replicalab probe --duration 30s` and `counter bench --kind redis` (fine), and
`counter exhausted` is an error message, not a command.

```
$ replicalab probe --store sim://simpledb --durationn 5s
replicalab probe output that is not a command --nonsense
$ replicalab cluster up redis --nodes 3 && replicalab clusters status
$ replicalab counter bench --store redis --clients 3,30
```

The bench: `counter bench --duration 30 --kind sim`, and `replicalab load ramp
--rampp 1:2:1`, `queue run/compar --help`, `probe --seed/--sed 3 --workload register`.
`counter bench --store redis` is deprecated: it still works, with a note.
`cluster up redis <str>` and `replicalab report RUN_DIR extra` take one argument;
`replicalab model toy-mm1` needs the plugin <!-- plugin adds: model toy-mm1 --> and
`replicalab model toy-mm2` does not exist; `replicalab store` is the label of a row.

```
replicalab load --rate 10   # a group without its sub-command
replicalab fast   62,907 req/s   (output: not a verb)
replicalab chek runs/x          (a verb mistyped)
```
"""


def test_a_drifted_doc_fails_naming_file_line_and_option(tool: tuple[Any, dict],
                                                         tmp_path: Path) -> None:
    root, tree = tool
    doc = tmp_path / "drifted.md"
    doc.write_text(DRIFTED)
    shown = commands_in(doc, tree)
    found = [p for s in shown for p in problems_of(s, root, tree)]
    text = "\n".join(found)
    expected = [
        ("drifted.md:5:", "unknown option --durationn of `replicalab probe`"),
        ("drifted.md:7:", "unknown verb 'clusters'"),
        ("drifted.md:8:", "--store is deprecated"),
        ("drifted.md:11:", "--duration 30: a duration needs its unit"),
        ("drifted.md:11:", "unknown option --rampp of `replicalab load ramp`"),
        ("drifted.md:12:", "unknown command `replicalab queue compar`"),
        ("drifted.md:12:", "unknown option --sed of `replicalab probe`"),
        ("drifted.md:14:", "`replicalab cluster up` takes 1 argument(s), the docs give 2"),
        ("drifted.md:14:", "`replicalab report` takes 1 argument(s), the docs give 2"),
        ("drifted.md:16:", "unknown command `replicalab model toy-mm2`"),
        ("drifted.md:19:", "`replicalab load` needs a sub-command"),
        ("drifted.md:21:", "unknown verb 'chek'"),
    ]
    for where, what in expected:
        assert any(p.startswith(where) and what in p for p in found), (where, what, text)
    assert len(found) == len(expected), text
    # the fine commands, output lines and the deprecated option where the text says so pass
    assert len(shown) == 19, [s.text for s in shown]


def test_words_split_as_a_shell_and_read_synopses() -> None:
    assert words("replicalab probe --store 'sim://quorum?n=3&r=1' --json | jq .") == \
        ["replicalab", "probe", "--store", "sim://quorum?n=3&r=1", "--json"]
    assert words("replicalab compare --kinds redis 2> log && echo done") == \
        ["replicalab", "compare", "--kinds", "redis"]
    assert words("replicalab hlc bench [--reps 100] [--max-rounds N | --duration D]") == \
        ["replicalab", "hlc", "bench", "--reps", "100", "--max-rounds", "N", "--duration", "D"]
    assert words("replicalab counter create|inc --server HOST:PORT  # a comment") == \
        ["replicalab", "counter", "create|inc", "--server", "HOST:PORT"]
    assert words("replicalab report runs/<run>/x") == ["replicalab", "report",
                                                       f"runs/{PLACEHOLDER}/x"]


def _leaves(name: str, command: Any) -> list[tuple[list[str], Any]]:
    subs = getattr(command, "commands", {})
    if not subs:
        return [([name], command)]
    return [([name, *path], c) for sub, cmd in subs.items() for path, c in _leaves(sub, cmd)]


def test_help_shows_placeholders_as_words(tool: tuple[Any, dict]) -> None:
    """docs/cli.md: placeholders in ``--help`` read as words, never ``<str>`` or
    ``<list[Path]>``; an argument reads ``KIND`` in the usage line, not ``{KIND}``."""
    _, tree = tool
    leaves = [leaf for verb, cmd in tree.items() for leaf in _leaves(verb, cmd)]
    assert len(leaves) > 40
    typed, braced = [], []
    for path, command in leaves:
        # the help --help prints, from the command's own context (nothing parsed or run)
        ctx = command.make_context(" ".join(["replicalab", *path]), [],
                                   resilient_parsing=True)
        text = command.get_help(ctx)
        assert "Options:" in text, (path, text)
        usage = text.split("\n\n", 1)[0]
        typed += [f"{' '.join(path)}: {t}" for t in re.findall(r"<[a-z][\w\[\], |]*>", text,
                                                                re.I)]
        braced += [f"{' '.join(path)}: {b}" for b in re.findall(r"\{[A-Z_]+\}", usage)]
    assert not typed, typed
    assert not braced, braced
