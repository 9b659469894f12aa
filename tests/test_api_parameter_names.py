"""Bad input to the Python API names the parameter the Python way, never a command-line
option ("duration '1 hour' ...", not "--duration '1 hour' ..."), wherever the bad value is
found (the probe's options, a workload's config, the fault schedule, the run directory);
the command line says the same with its options (``cli/errors.py`` ``said``)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import replicalab
from replicalab.cli.errors import said
from replicalab.errors import ParameterError

PROBE_FLAGS = {"faults_file": "--faults", "faults": "--fault"}
"""How ``replicalab probe`` spells the parameters whose option is not ``--`` + name."""

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, probe arguments, the Python message starts, the command line's starts)
    ("duration", {"duration": "1 hour"}, "duration '1 hour' must be a positive duration",
     "--duration '1 hour' must be a positive duration"),
    ("read_rate", {"read_rate": -1}, "read_rate must be positive",
     "--read-rate must be positive"),
    ("workload", {"workload": "nope"}, "workload 'nope': use one of",
     "--workload 'nope': use one of"),
    ("ops", {"workload": "latency", "ops": 1}, "ops 1 must be at least 2",
     "--ops 1 must be at least 2"),
    ("placement", {"placement": "nowhere"}, "placement 'nowhere': use same-client",
     "--placement 'nowhere': use same-client"),
    ("readers", {"readers": 3},
     "readers has no effect with placement same-client (the writer does the reads); add "
     "placement separate-clients or drop it",
     "--readers has no effect with --placement same-client (the writer does the reads); add "
     "--placement separate-clients or drop it"),
    ("writer_region", {"workload": "latency", "writer_region": "US-E"},
     "writer_region has no effect with workload latency",
     "--writer-region has no effect with --workload latency"),
    ("length", {"workload": "list-append", "length": 2, "min_length": 1},
     "length sets both min_length and max_length; give either length or those two",
     "--length sets both --min-length and --max-length; give either --length or those two"),
    ("mix", {"workload": "register", "mix": "read=10"}, "mix 'read=10': without writes",
     "--mix 'read=10': without writes"),
    ("fault", {"faults": ["at=1s explode"]}, "faults 'at=1s explode': action 'explode'",
     "--fault 'at=1s explode': action 'explode'"),
    ("fault_late", {"duration": "10s", "faults": ["at=30s crash node=1 for=1s"]},
     "duration 10 s: fault 'crash n1' at 30s starts after the 10 s probe ends; make at= "
     "smaller or duration longer",
     "--duration 10 s: fault 'crash n1' at 30s starts after the 10 s probe ends; make at= "
     "smaller or --duration longer"),
    ("faults_file", {"faults_file": "no-such-faults.toml"},
     "faults_file no-such-faults.toml: no such file",
     "--faults no-such-faults.toml: no such file"),
    ("prefix", {"prefix": "/abs/"}, "prefix '/abs/': a key prefix may not start",
     "--prefix '/abs/': a key prefix may not start"),
]


@pytest.mark.parametrize("given, python, command_line", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_probe_errors_name_parameters_the_python_way(
        given: dict[str, Any], python: str, command_line: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = "sim://primary" if "faults" in given else "sim://simpledb"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecation would be a warning, not this error
        with pytest.raises(ParameterError) as caught:
            replicalab.probe(store, **{"duration": "5s", **given}, out=tmp_path / "runs",
                             progress=False)
    message = str(caught.value)
    assert "--" not in message
    assert message.startswith(python), message
    assert said(caught.value, PROBE_FLAGS).startswith(command_line)
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


def test_other_verbs_and_the_run_directory_name_parameters_the_python_way(
        tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    bad_calls = [
        lambda: replicalab.compare(["sim://simpledb"], duration="soon"),
        lambda: replicalab.probe("sim://simpledb", duration="2s", out=a_file / "runs",
                                 progress=False),
        lambda: replicalab.probe("sim://simpledb", workload="sweep", variants="get",
                                 duration="2s", out=tmp_path, progress=False),
        lambda: replicalab.probe("sim://primary", duration="2s", out=tmp_path,
                                 faults=["at=1s power-loss node=1 for=1s"], progress=False),
    ]
    messages = []
    for call in bad_calls:
        with pytest.raises(ParameterError) as caught:
            call()
        messages.append(str(caught.value))
    assert [m for m in messages if "--" in m] == []
    assert [m.split()[0] for m in messages] == ["duration", "out", "variants", "faults"]
