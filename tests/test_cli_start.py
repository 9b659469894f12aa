"""The CLI starts without importing the verbs it does not run (cli/main.py's registry)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from replicalab.cli.main import VERBS, load_verb

_PROBE = """
import sys, json
from replicalab.cli.main import main
sys.argv = ["replicalab", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
mods = sorted(m for m in sys.modules if m.startswith("replicalab.cli."))
print(json.dumps({"cli": mods, "numpy": "numpy" in sys.modules,
                  "pyarrow": "pyarrow" in sys.modules, "typer": "typer" in sys.modules,
                  "asyncio": "asyncio" in sys.modules}), file=sys.stderr)
"""


def _loaded(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(args))],
                       capture_output=True, text=True, timeout=60)
    return json.loads(p.stderr.strip().splitlines()[-1])


def test_help_imports_no_verb():
    got = _loaded("--help")
    # the entry point, its errors and the Typer app: no verb
    assert got["cli"] == ["replicalab.cli.app", "replicalab.cli.errors",
                          "replicalab.cli.main"], got
    assert not got["numpy"] and not got["pyarrow"]


def test_a_check_of_a_file_imports_neither_typer_nor_asyncio(tmp_path):
    """``replicalab check FILE`` parses its plain options itself: no Typer, no asyncio,
    no numpy; ``check --help`` goes through Typer."""
    path = tmp_path / "h.edn"
    path.write_text("{:type :invoke, :f :write, :value 1, :process 0}\n"
                    "{:type :ok, :f :write, :value 1, :process 0}\n")
    got = _loaded("check", str(path), "--model", "register", "--timeout=10s")
    assert "replicalab.cli.check" in got["cli"] and "replicalab.cli.app" not in got["cli"]
    assert not got["typer"] and not got["asyncio"] and not got["numpy"], got
    assert _loaded("check", "--help")["typer"]


def test_a_verb_imports_its_own_module_only():
    got = _loaded("check", "--help")
    others = {v.module for v in VERBS} - {"replicalab.cli.check"}
    assert "replicalab.cli.check" in got["cli"]
    assert not others & set(got["cli"]), got


def test_every_registry_line_loads_a_command_with_help():
    names = dict.fromkeys(v.name for v in VERBS)
    for name in names:
        cmd = load_verb(name)
        assert cmd is not None and cmd.name == name, name
        assert next(v.summary for v in VERBS if v.name == name), name
    assert load_verb("no-such-verb") is None
    assert "live" in load_verb("placement").commands  # placement simulate and live


STALE = """\
{:type :invoke, :f :write, :value 1, :process 0, :time 0}
{:type :ok, :f :write, :value 1, :process 0, :time 1000000}
{:type :invoke, :f :write, :value 2, :process 0, :time 2000000}
{:type :ok, :f :write, :value 2, :process 0, :time 3000000}
{:type :invoke, :f :read, :value nil, :process 1, :time 4000000}
{:type :ok, :f :read, :value 1, :process 1, :time 5000000}
"""


def _timeless(text: str) -> str:
    """Return ``text`` without the times a check took (they differ from run to run)."""
    return re.sub(r'"check_n?s": [0-9.]+|[0-9.]+ s\b', "T", text)


def test_check_parsed_without_typer_says_what_typer_parsed_says(tmp_path):
    """The same command lines through ``cli/check.py``'s own parser (the installed
    command's path) and through the Typer app: the same exit status, output and error."""
    from typer.testing import CliRunner

    from replicalab.cli.check import fast
    from replicalab.cli.main import app

    stale, fine = tmp_path / "stale.edn", tmp_path / "fine.edn"
    stale.write_text(STALE)
    fine.write_text(STALE.replace(":value 1, :process 1", ":value 2, :process 1"))
    lines = [[str(stale), "--model", "register"], [str(fine), "--model=register", "--json"],
             [str(stale), str(fine), "--model", "cas-register", "--fail-fast", "--json"],
             [str(fine), "--timeout", "5s", "--model", "register"],
             [str(tmp_path / "missing.edn")], [str(stale), "--model", "nope"],
             [str(stale), "--timeout", "soon", "--model", "register"], [str(stale)]]
    for args in lines:
        assert fast(args) is not None, args  # these go the fast way
        p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "check", *args],
                           capture_output=True, text=True, timeout=60)
        r = CliRunner().invoke(app, ["check", *args])
        assert (p.returncode, _timeless(p.stdout), p.stderr) == (
            r.exit_code, _timeless(r.stdout), r.stderr), args
    for args in (["--help"], [str(stale), "--model"], [str(stale), "--modle", "kv"], [],
                 [str(stale), "--model", "kv", "--model", "register"], ["--", str(stale)]):
        assert fast(args) is None, args  # Typer parses (and refuses) these
