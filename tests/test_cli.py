"""The command line: results, --json, and bad input (one line, exit 2, no traceback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from tests.parked import Parked

EXE = [sys.executable, "-m", "replicalab.cli.main"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "120"})


def _one_line_error(p: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == code, p.stderr
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in p.stderr + p.stdout
    for n in needles:
        assert n in lines[0], lines[0]


def test_probe_json_staleness(tmp_path: Path):
    p = run("probe", "--store", "sim://simpledb", "--duration", "10m", "--json",
            "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["workload"] == "staleness"
    assert {"from_ms", "to_ms", "fresh", "total"} <= set(out["fresh_by_range"][0])
    assert set(out["successive_reads"]) >= {"stale_stale", "stale_fresh", "fresh_stale",
                                             "fresh_fresh", "pearson"}
    run_dir = Path(out["run_dir"])
    for name in ("config.json", "history.parquet", "results.json", "report.html"):
        assert (run_dir / name).is_file(), name
    assert list((run_dir / "figures").glob("*.png"))
    hlogs = list((run_dir / "histograms").glob("*.hlog"))
    assert {h.name for h in hlogs} == {"read_eventual.hlog", "write_none.hlog"}
    assert "#[StartTime" in hlogs[0].read_text() or "HIST" in hlogs[0].read_text()


def test_probe_json_other_workloads(tmp_path: Path):
    p = run("probe", "--workload", "monotonic-writes", "--variant", "same", "--duration", "5m",
            "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert set(json.loads(p.stdout)["version_fraction"]["A1"]) == {"v0", "v1", "v2"}
    p = run("probe", "--workload", "inter-element", "--placement", "same-item",
            "--write-mode", "one-call", "--read-mode", "one-multi", "--duration", "5m",
            "--json", "--out", str(tmp_path), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    abcd = json.loads(p.stdout)["abcd"]
    assert set(abcd) == {"A", "B", "C", "D"} and abcd["B"] == abcd["C"] == 0


def test_report_rerenders_from_saved_history(tmp_path: Path):
    p = run("probe", "--duration", "5m", "--json", "--out", str(tmp_path), cwd=tmp_path)
    run_dir = Path(json.loads(p.stdout)["run_dir"])
    before = (run_dir / "results.json").read_bytes()
    (run_dir / "report.html").unlink()
    (run_dir / "results.json").unlink()
    p = run("report", str(run_dir), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (run_dir / "report.html").is_file()
    assert (run_dir / "results.json").read_bytes() == before


@pytest.mark.parametrize(("args", "needles"), [
    (["--store", "foo://x"], ["unknown store URL scheme 'foo'", "sim://"]),
    (["--store", "sim://quorum?n=3&x=1"], ["unknown parameter 'x'", "valid:"]),
    (["--store", "sim://quorum?r=0"], ["r=0 must be between 1 and n=3"]),
    (["--read-rate", "0"], ["--read-rate must be positive"]),
    (["--read-rate", "-5"], ["--read-rate must be positive"]),
    (["--write-interval", "0s"], ["--write-interval", "positive duration"]),
    (["--duration", "-1m"], ["--duration", "positive duration"]),
    (["--duration", "soon"], ["--duration 'soon'"]),
    (["--consistency", "strong"], ["--consistency 'strong'", "eventual or consistent"]),
    (["--workload", "nope"], ["--workload 'nope'"]),
    (["--ranges", "450-0"], ["range '450-0'"]),
    (["--store", "sim://quorum", "--workload", "monotonic-writes", "--variant",
      "two-then-one"], ["cannot do atomic-multi-write"]),
    (["--placement", "same-item", "--workload", "inter-element", "--write-mode", "three"],
     ["--write-mode 'three'"]),
    (["--bogus"], ["No such option"]),
    # issue 40: Click suggested --duration, --spacing; the level goes in the URL
    (["--isolation", "serializable"], ["--isolation is not an option",
                                       "a parameter of the store URL",
                                       "?isolation=serializable'"]),
])
def test_bad_input_one_line_exit_2(tmp_path: Path, args, needles):
    _one_line_error(run("probe", "--duration", "1m", "--out", str(tmp_path), *args,
                        cwd=tmp_path), 2, *needles)


def test_unwritable_output_directory(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    _one_line_error(run("probe", "--duration", "1m", "--out", str(blocker / "runs"),
                        cwd=tmp_path), 2, "cannot write to output directory", "--out")


def test_report_of_missing_or_malformed_run(tmp_path: Path):
    _one_line_error(run("report", str(tmp_path / "nope"), cwd=tmp_path), 2,
                    "does not exist", "pass a run directory")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "history.parquet").write_text("garbage")
    (bad / "config.json").write_text("{}")
    _one_line_error(run("report", str(bad), cwd=tmp_path), 2, "malformed")


def _cpu_wait_s(pid: int) -> float:
    """Return the seconds ``pid``'s main thread has waited for a CPU (/proc/PID/schedstat):
    what a loaded machine adds to its wall time (0.0 once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def test_ctrl_c_ends_a_simulation_within_a_second_with_its_history_saved(tmp_path: Path):
    """Issue 29: Ctrl-C 5 s into a 24 h simulated probe ends it within a second (wall time
    less what the machine made it wait for a CPU), its history saved; `replicalab report`
    then checks it and draws the partial report."""
    t0 = time.monotonic()
    proc = subprocess.Popen([*EXE, "probe", "--store", "sim://simpledb", "--duration", "24h",
                             "--out", str(tmp_path)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # the first piped progress line: the run is going (a fixed sleep raced a slow start-up
    # on a busy machine, and the interrupt came before the run directory existed)
    first = proc.stderr.readline()
    assert "% done" in first, first
    time.sleep(max(0.0, 5.0 - (time.monotonic() - t0)))
    waited0 = _cpu_wait_s(proc.pid)
    proc.send_signal(signal.SIGINT)
    sent, waited = time.monotonic(), waited0
    deadline = sent + 60
    while proc.poll() is None and time.monotonic() < deadline:
        waited = _cpu_wait_s(proc.pid) or waited  # the last reading before it is gone
        time.sleep(0.01)
    exit_s = time.monotonic() - sent
    _, err = proc.communicate(timeout=10)
    err = first + err
    assert proc.returncode == 130, err
    cpu_wait_s = max(0.0, waited - waited0)
    assert exit_s - cpu_wait_s <= 1.0, (exit_s, cpu_wait_s, err)
    lines = err.strip().splitlines()  # progress lines (piped: on stderr), then the error
    assert "Traceback" not in err and "finished" not in err, err
    assert all("% done" in line for line in lines[:-1]), err
    assert "interrupted, stopped before the end" in lines[-2], err
    (run_dir,) = list(tmp_path.glob("*-staleness-*"))
    assert lines[-1].startswith("error: interrupted after ") and "of 24h00m simulated" in \
        lines[-1] and f"replicalab report {run_dir}" in lines[-1], lines[-1]
    table = pq.read_table(run_dir / "history.parquet")
    assert table.num_rows > 1000 and f"({table.num_rows:,} operations)" in lines[-1]
    assert "invoke" not in set(table["type"].to_pylist())  # in-flight ops closed as info
    config = json.loads((run_dir / "config.json").read_text())
    assert config["interrupted"] is True
    # the simulated time it ran, not the 24 h asked (issue 40); the history's own clock
    last_s = max(table["complete_ns"].to_pylist()) / 1e9
    assert 0 < config["ran_s"] < 0.99 * 24 * 3600 and abs(config["ran_s"] - last_s) < 60
    # the report command checks the saved history: a partial report, the cut said
    rep = run("report", str(run_dir), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert (run_dir / "report.html").is_file() and "report:" in rep.stdout
    results = json.loads((run_dir / "results.json").read_text())
    assert results["partial"] and any("cut short" in n for n in results["notes"])


def test_export_edn_and_jsonl(tmp_path: Path):
    p = run("probe", "--duration", "1m", "--json", "--out", str(tmp_path), cwd=tmp_path)
    run_dir = Path(json.loads(p.stdout)["run_dir"])
    ops = pq.read_table(run_dir / "history.parquet").num_rows
    p = run("export", str(run_dir), "--format", "jsonl", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    events = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    assert len(events) == 2 * ops
    assert {e["type"] for e in events} == {"invoke", "ok"}
    p = run("export", str(run_dir), "--output", str(tmp_path / "h.edn"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "h.edn").read_text().startswith("{:index 0, :process 0, :f :write")
    _one_line_error(run("export", str(run_dir), "--format", "xml", cwd=tmp_path), 2,
                    "--format 'xml'")


def test_histogram_logs_read_back(tmp_path: Path):
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    p = run("probe", "--duration", "2m", "--json", "--out", str(tmp_path), cwd=tmp_path)
    out = json.loads(p.stdout)
    path = Path(out["run_dir"]) / "histograms" / "read_eventual.hlog"
    hist = HistogramLogReader(str(path), HdrHistogram(1, 3_600_000_000, 3)
                              ).get_next_interval_histogram()
    lat = out["latency"]["read/eventual"]
    assert hist.get_total_count() == lat["count"] == out["ops"]["reads"]
    assert abs(hist.get_value_at_percentile(99) / 1000 - lat["p99_ms"]) < 0.05


def test_version_prints_and_exits_0(tmp_path: Path):
    from replicalab import __version__

    p = run("--version", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == __version__


def test_an_interrupted_scorecard_never_says_finished(tmp_path: Path):
    """Issue 29: the scorecard catches Ctrl-C to keep its cells, then ended its progress
    with "finished (100% done)"; its last progress line now says it was interrupted."""
    # Ctrl-C while the scorecard waits at its first progress line (cells being measured;
    # read first, the line left about 2 s of work for a busy machine to delay the signal past)
    run = Parked([*EXE, "scorecard", "--kinds",
                  "sim://primary?regions=dc3,sim://quorum,sim://simpledb", "--out", str(tmp_path)],
                 cwd=tmp_path, stdout=subprocess.PIPE)
    err = run.interrupt()
    assert run.proc.returncode == 130, err
    assert "finished" not in err and "Traceback" not in err, err
    progress = [ln for ln in err.splitlines() if "% done" in ln]
    assert "interrupted, stopped before the end" in progress[-1], err
    assert "100% done" not in progress[-1]
    (run_dir,) = tmp_path.glob("*-scorecard-*")
    assert json.loads((run_dir / "scorecard.json").read_text())["interrupted"] is True


def test_a_note_an_earlier_command_left_is_not_the_next_commands(tmp_path: Path):
    """Commands run in one process (a notebook, CliRunner): a deprecation note queued by one
    that never printed it (CI saw "note: --duration 10 ..." after another test's JSON) must
    not come out of the next."""
    from typer.testing import CliRunner

    from replicalab.cli import errors
    from replicalab.cli.main import typer_app

    errors.note("--duration 10: left over from an earlier command")
    res = CliRunner().invoke(typer_app(), ["load", "run", "--store", "sim://primary", "--rate",
                                           "50", "--duration", "1s", "--json", "--out",
                                           str(tmp_path)])
    assert res.exit_code == 0, res.stderr
    assert "left over" not in res.stdout + res.stderr
