"""``greentrain report``: writes the page, one-line errors with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.cli import main

pytestmark = pytest.mark.timeout(60)


def test_report_command_writes_index_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "run.jsonl"
    log.write_text('{"t": "2022-01-01T00:00Z", "event": "carbon", "intensity_g_per_kwh": 120.0, "zone": "GB"}\n'
                   '{"t": "2022-01-01T00:00Z", "event": "state", "state": "running"}\n'
                   '{"t": "2022-01-01T00:10Z", "event": "step", "duration_s": 600, "energy_j": 120000}\n')
    main(["report", str(log), "--out", str(tmp_path / "r")])
    assert capsys.readouterr().out.strip() == str(tmp_path / "r" / "index.html")
    assert "4.00 gCO2eq" in (tmp_path / "r" / "index.html").read_text()  # 1/30 kWh x 120 g/kWh


def test_missing_log_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["report", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "r")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("greentrain: error:") and "nope.jsonl" in err and "\n" not in err


def test_out_is_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["report", str(tmp_path / "x.jsonl")])
    assert info.value.code == 2
    assert "--out" in capsys.readouterr().err
