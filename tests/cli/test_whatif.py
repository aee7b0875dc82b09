"""``greentrain whatif``: the shipped example on the shipped trace (terminal, JSON, HTML report), and bad
input as one line naming the file and the column, row or flag, exit 2; a partial file still reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from greentrain.cli import main
from greentrain.codecarbon.columns import V2_COLUMNS
from greentrain.data import __file__ as data_init

pytestmark = pytest.mark.timeout(120)
EXAMPLE = Path(data_init).parent / "codecarbon" / "emissions-example.csv"
GB = Path(data_init).parent / "carbon" / "GB_2022_hourly.csv"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(["whatif", *args])
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def test_the_shipped_example_on_the_shipped_trace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, str(EXAMPLE), "--trace", str(GB), "--json", "--report", str(tmp_path / "r"))
    assert code == 0, err
    doc = json.loads(out)
    runs = doc["files"][0]["runs"]
    summary = doc["summary"]
    assert summary["runs"] == len(runs) == 5 and summary["deadlines_missed"] == 0
    assert summary["saving_g"] == pytest.approx(sum(r["saving_g"] for r in runs), abs=1e-5)
    assert summary["saving_g"] == pytest.approx(summary["run_now_emissions_g"] - summary["emissions_g"], abs=1e-5)
    for run in runs:
        assert run["finished_at"] <= run["deadline"] and run["delay_s"] >= 0
        assert run["precision"].startswith("no profile")
    assert [bool(r["power_limits_w"]) for r in runs] == [True, True, True, False, True]  # the CPU-only run has none
    assert runs[3]["profile"] == "no profile (no GPU in the row)"
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "What greentrain would have done" in page and "emissions-example.csv:6" in page
    assert (tmp_path / "r" / "schedule.png").stat().st_size > 1000 and "report written to" in err
    code, out, _ = run_cli(capsys, str(EXAMPLE), "--trace", str(GB), "--deadline-hours", "1")
    assert code == 0 and "total: run now" in out and "shorter than the run" in out


def test_a_partial_file_reports_the_rows_it_could_use(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "partial.csv"
    path.write_text("\n".join([lines[0], lines[1], ",,,", lines[2].replace(",GBR,", ",FRA,")]) + "\n",
                    encoding="utf-8")
    code, out, err = run_cli(capsys, str(path), "--trace", str(GB), "--json")
    assert code == 0
    assert [r["row"] for r in json.loads(out)["files"][0]["runs"]] == [2]
    assert f"greentrain: warning: {path}:3: skipped: empty row" in err
    assert f"greentrain: warning: {path}:4: skipped: zone FR, but the trace is for GB" in err


@pytest.mark.parametrize(("content", "args", "needle"), [
    (b"timestamp,duration,energy_consume\n2022-03-01T00:00:00,60,1\n", [],
     "no column 'energy_consumed' (did you mean 'energy_consume'?)"),
    (b"timestamp,duration,energy_consumed\n2022-03-01T00:00:00,60,\xff\n", [],
     ":2: column 'energy_consumed': byte 0xff is not UTF-8"),
    (b"timestamp,duration,energy_consumed\n,,\n", [], ":2: empty row"),
    (",".join(V2_COLUMNS).encode() + b"\n", ["--timestamps-tz", "Mars/Olympus"], "--timestamps-tz: 'Mars/Olympus'"),
    (",".join(V2_COLUMNS).encode() + b"\n", ["--slack", "0.5"], "--slack: must be >= 1"),
    (",".join(V2_COLUMNS).encode() + b"\n", ["--zone", "Narnia"], "--zone: 'Narnia' is not the zone of the trace"),
    (",".join(V2_COLUMNS).encode() + b"\n", ["--gpu-profile", "h900"], "--gpu-profile: h900: cannot read GPU profile"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes,
                                          args: list[str], needle: str) -> None:
    path = tmp_path / "emissions.csv"
    path.write_bytes(content + (EXAMPLE.read_bytes().splitlines()[1] + b"\n" if args else b""))
    code, out, err = run_cli(capsys, str(path), "--trace", str(GB), *args)
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith("greentrain: error: ") and needle in line and "Traceback" not in err


def test_exactly_one_carbon_source(capsys: pytest.CaptureFixture[str]) -> None:
    for args in ([], ["--trace", str(GB), "--provider", "static"]):
        code, _, err = run_cli(capsys, str(EXAMPLE), *args)
        assert code == 2 and err.strip() == "greentrain: error: give exactly one of --trace FILE or --provider SPEC"
