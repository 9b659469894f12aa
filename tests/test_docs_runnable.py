"""The README and docs run as written: every command block marked runnable is executed.

Convention (docs/cli.md): an HTML comment on the line right before a fenced block,

    <!-- runnable -->           every `replicalab ...` command in the block exits 0;
    <!-- runnable: errors -->   every command exits 2 with one `error: ...` line, and the error
                                line the block shows after it (up to its first "(") is what
                                the command prints;
    <!-- runnable: python -->   a ```python block (docs/python-api.md): run as a script in a
                                fresh directory; it passes when it raises nothing (its own
                                asserts say what it shows).
    <!-- runnable: figures -->  every command exits 0 (or 1: `check` of a history that is not
                                linearizable), and every other line of the block is output
                                they print now, figure for figure: a shown line must match a
                                printed line of the same shape (numbers aside, box-drawing and
                                spaces collapsed) whose numbers are the same as printed. Run
                                directory names and wall-clock seconds (a number followed by
                                " s") may differ; "..." lines stand for lines left out. These
                                blocks run on the simulator, so a changed figure is a change
                                in the code, never noise.

Command lines start with `replicalab`, `$ replicalab` or `$ .venv/bin/replicalab`; a
trailing backslash continues a line; `# ...` is a comment; other lines (output shown in the
block) are skipped. Placeholders: `runs/<run>` is the newest run directory under `runs/` that
has what the rest of the path names (a history for `report`/`export`), `<URL>` the store URL
the block's last `cluster up` printed; `*` globs expand as a shell would. The commands of a
block run in order, in one fresh directory (with `docs/` linked in), in this process.
"""

from __future__ import annotations

import glob
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicalab.cli.main import app

REPO = Path(__file__).resolve().parent.parent
MARK = re.compile(r"^<!--\s*runnable(?::\s*(\w+))?\s*-->\s*$")
PROMPT = re.compile(r"^\$?\s*(?:\.venv/bin/)?replicalab\s")


@dataclass
class Block:
    """One marked block: where it is, how it must end, and its commands with the error line
    the block shows after each (or "")."""

    path: Path
    line: int
    mode: str
    commands: list[tuple[str, str]]
    shown: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Return the runnable blocks of the Markdown file ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for i, text in enumerate(lines):
        m = MARK.match(text.strip())
        if not m or i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            continue
        body = []
        for j in range(i + 2, len(lines)):
            if lines[j].startswith("```"):
                break
            body.append(lines[j])
        found.append(Block(path, i + 2, m.group(1) or "ok", commands_of(body),
                           shown_lines(body), "\n".join(body)))
    return found


def shown_lines(body: list[str]) -> list[str]:
    """Return the output lines a block shows: not commands (nor their continuation lines),
    comments, blank lines or "..." elisions."""
    out, k = [], 0
    while k < len(body):
        line = body[k]
        k += 1
        if PROMPT.match(line):
            while line.rstrip().endswith("\\") and k < len(body):
                line = body[k]
                k += 1
            continue
        text = line.strip()
        if not text or text.startswith("#") or re.fullmatch(r"[│|]?\s*(\.\.\.|…)\s*[│|]?",
                                                             text):
            continue
        out.append(line)
    return out


NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
VOLATILE = (re.compile(r"\d{8}T\d{6}Z[\w.-]*"),  # a run directory's name (its UTC time)
            re.compile(r"-?\d[\d,]*(?:\.\d+)? s\b"))  # wall-clock seconds


def shape(line: str) -> tuple[str, list[str]]:
    """Return (the line with numbers as #, box runs and spaces collapsed; its numbers),
    volatile parts dropped."""
    for v in VOLATILE:
        line = v.sub("~", line)
    numbers = NUMBER.findall(line)
    text = NUMBER.sub("#", line)
    text = re.sub(r"([━─═┄])\1+", r"\1", text)
    return " ".join(text.split()), numbers


def drift(shown: list[str], printed: str) -> list[str]:
    """Return one message per shown line that the printed output does not hold as shown."""
    got: dict[str, list[list[str]]] = {}
    for line in printed.splitlines():
        form, numbers = shape(line)
        got.setdefault(form, []).append(numbers)
    problems = []
    for line in shown:
        form, numbers = shape(line)
        if form not in got:
            problems.append(f"the docs show a line the commands no longer print: {line!r}")
        elif numbers not in got[form]:
            problems.append(f"figures differ: the docs show {numbers} in {line.strip()!r}, "
                            f"the commands print {got[form][0]}")
    return problems


def commands_of(body: list[str]) -> list[tuple[str, str]]:
    """Return (command, error line shown after it) for each command line of a block."""
    out: list[tuple[str, str]] = []
    k = 0
    while k < len(body):
        line = body[k]
        k += 1
        if not PROMPT.match(line):
            if out and line.startswith("error: ") and not out[-1][1]:
                out[-1] = (out[-1][0], line)
            continue
        cmd = line
        while cmd.rstrip().endswith("\\") and k < len(body):
            cmd = cmd.rstrip()[:-1] + " " + body[k].strip()
            k += 1
        out.append((re.sub(r"^\$\s*", "", cmd).strip(), ""))
    return out


def all_blocks() -> list[Block]:
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [b for f in files for b in blocks(f)]


def _newest_run(cwd: Path, rest: str) -> str:
    runs = sorted((cwd / "runs").glob("*"), reverse=True)
    for d in runs:
        if rest and glob.glob(str(d) + rest):
            return str(d.relative_to(cwd))
        if not rest and (d / "history.parquet").exists():
            return str(d.relative_to(cwd))
    raise AssertionError(f"no run directory under runs/ has {rest or 'a history'}")


def argv(cmd: str, cwd: Path, url: str | None) -> list[str]:
    """Return the arguments of ``cmd`` with placeholders filled in and globs expanded."""
    words = shlex.split(cmd, comments=True)
    assert words and words[0].endswith("replicalab"), cmd
    out: list[str] = []
    for w in words[1:]:
        if "<URL>" in w or "<printed URL>" in w:
            assert url, f"{cmd}: no `cluster up` before it printed a store URL"
            w = w.replace("<URL>", url).replace("<printed URL>", url)
        m = re.match(r"^runs/<run(?: dir)?>(.*)$", w)
        if m:
            w = _newest_run(cwd, m.group(1)) + m.group(1)
        if any(c in w for c in "*?[") and not w.startswith(("-", "sim://", "'")):
            matches = sorted(glob.glob(str(cwd / w)))
            if matches:
                out += [str(Path(x).relative_to(cwd)) for x in matches]
                continue
        out.append(w)
    return out


BLOCKS = all_blocks()


def test_the_convention_finds_blocks_and_parses_commands():
    assert len(BLOCKS) >= 5, [b.id for b in BLOCKS]
    cmds = commands_of(["$ replicalab probe --duration 1m \\", "    --json   # a comment",
                        "output line", "$ replicalab report nope", "error: nope does not",
                        "$ echo $?"])
    assert cmds == [("replicalab probe --duration 1m  --json   # a comment", ""),
                    ("replicalab report nope", "error: nope does not")]


def run_block(block: Block, cwd: Path) -> None:
    """Run the commands of ``block`` in order in ``cwd`` (the current directory); raise
    AssertionError at the first that does not end as the block says (for a figures block,
    then at every shown line whose figures differ from what the commands printed)."""
    if block.mode == "python":
        exec(compile(block.source, block.id, "exec"), {"__name__": "__docs__"})
        return
    url = None
    runner = CliRunner()
    printed = []
    for cmd, shown in block.commands:
        args = argv(cmd, cwd, url)
        res = runner.invoke(app, args, env={"COLUMNS": "100"})
        where = f"{block.id}: {cmd}"
        if block.mode == "errors":
            lines = res.stderr.strip().splitlines()
            assert res.exit_code == 2, (where, res.exit_code, res.output)
            assert len(lines) == 1 and lines[0].startswith("error: "), (where, res.stderr)
            if shown:
                expect = shown.split("(")[0].strip()
                assert lines[0].startswith(expect), (where, lines[0], expect)
            continue
        ok = (0, 1) if block.mode == "figures" and args[:1] == ["check"] else (0,)
        assert res.exit_code in ok, (where, res.exit_code, res.stderr, res.exception)
        printed.append(res.stdout + res.stderr)
        for line in res.stdout.splitlines():
            if line.startswith("store URL: "):
                url = line.split(": ", 1)[1]
    if block.mode == "figures":
        problems = drift(block.shown, "\n".join(printed))
        assert not problems, f"{block.id}: " + "\n".join(problems)


def test_a_block_that_does_not_run_as_written_fails(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- runnable: errors -->\n```\n$ replicalab report nope\n"
                   "error: nope is not what it says now\n```\n\n<!-- runnable -->\n```\n"
                   "replicalab probe --duration 1m --consistency strong\n```\n")
    doc.write_text(doc.read_text() + "\n<!-- runnable: python -->\n```python\n"
                   "assert 1 + 1 == 3, 'the example no longer holds'\n```\n")
    wrong_error, failing, python = blocks(doc)
    assert python.mode == "python" and "assert 1 + 1 == 3" in python.source
    for block in (wrong_error, failing, python):
        block.path = REPO / "README.md"  # for its id only
        with pytest.raises(AssertionError):
            run_block(block, tmp_path)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_runnable_block(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "docs").symlink_to(REPO / "docs")
    monkeypatch.chdir(tmp_path)
    try:
        run_block(block, tmp_path)
    finally:
        _remove_emulated_hosts()


def _remove_emulated_hosts() -> None:
    """Remove the emulated hosts a block made and did not remove (it failed half way):
    namespaces and a bridge outlive the test otherwise (docs/hosts.md)."""
    from replicalab.cluster.state import state_root
    from replicalab.hosts import emulated

    root = state_root()
    for name in emulated.sets(root):
        emulated.down(name, root)


def test_a_figures_block_fails_on_a_changed_figure_not_on_volatile_ones():
    printed = ("runs/20261126T033054Z-register-sim-primary (kv model): NOT linearizable, "
               "1,293 ops, 3 keys, 0.05 s\n"
               "│ fresh in [0, 450) ms      │    32.98% (12,986/39,376) │")
    same = ["runs/20240101T000000Z-register-sim-primary (kv model): NOT linearizable, "
            "1,293 ops, 3 keys, 1.20 s",
            "│ fresh in [0, 450) ms │ 32.98% (12,986/39,376) │"]
    assert drift(same, printed) == []
    changed = drift(["│ fresh in [0, 450) ms │ 33.43% (12,986/39,376) │"], printed)
    assert len(changed) == 1 and "33.43" in changed[0] and "32.98" in changed[0]
    gone = drift(["median first time >= 99% fresh 503.0 ms"], printed)
    assert "no longer print" in gone[0]
