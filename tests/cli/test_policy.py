"""``greentrain policy``: validate, list, show."""

from __future__ import annotations

import pytest

from greentrain.cli import main

pytestmark = pytest.mark.timeout(60)


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(["policy", *args])
        raise SystemExit(0)
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def test_validate_good_file_and_preset(tmp_path, capsys):
    path = tmp_path / "mine.toml"
    path.write_text('[policy]\nkind = "threshold"\nthreshold_g_per_kwh = 150\n[settings]\npause_mode = "suspend"\n')
    code, out, _ = run_cli(capsys, "validate", str(path), "deadline-strict")
    assert code == 0
    assert f"{path}: ok (kind threshold" in out and "threshold_g_per_kwh=150.0" in out
    assert "pause_mode=suspend" in out
    assert "deadline-strict: ok (kind carbon-aware" in out and "reserve_s=1800.0" in out


def test_validate_bad_file_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text('[policy]\nkind = "forecast-optimal"\nsafety_z = -1\n')
    code, _, err = run_cli(capsys, "validate", str(path))
    assert code == 2
    assert err.strip() == f"greentrain: error: {path}: policy.safety_z: must be in [0, 10] standard deviations, got -1.0"


def test_list_and_show(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0 and "carbon-aware: kind carbon-aware" in out and "run-now: kind run-now" in out
    code, out, _ = run_cli(capsys, "show", "carbon-aware")
    assert code == 0 and 'kind = "carbon-aware"' in out
    code, _, err = run_cli(capsys, "show", "nope")
    assert code == 2 and "unknown preset 'nope'" in err
