"""Shipped traces by name (``greentrain.signals.shipped``): ``csv:GB_2022`` from any directory; a trace that
cannot be read is one line that lists the shipped names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.signals import make_provider
from greentrain.signals.shipped import resolve_trace, shipped_traces

pytestmark = pytest.mark.timeout(60)


def test_the_shipped_traces_are_listed_by_short_name() -> None:
    traces = shipped_traces()
    assert {"GB_2022", "US-CAL-CISO_2022"} <= set(traces)
    assert all(path.is_file() and path.parent.name == "carbon" for path in traces.values())


@pytest.mark.parametrize("spec", ["GB_2022", "GB_2022_hourly.csv", "GB_2022_hourly",
                                  "greentrain/data/carbon/GB_2022_hourly.csv"])
def test_a_shipped_name_resolves_from_any_directory(spec: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_trace(spec) == shipped_traces()["GB_2022"]
    assert make_provider(f"csv:{spec}").zone == "GB"


def test_a_path_that_exists_wins_and_another_folder_is_never_swapped(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "GB_2022.csv").write_text("mine")
    assert resolve_trace("GB_2022.csv") == Path("GB_2022.csv")
    with pytest.raises(ConfigError, match="not a shipped trace"):
        resolve_trace(str(tmp_path / "elsewhere" / "GB_2022_hourly.csv"))


def test_an_unreadable_trace_is_one_line_listing_the_shipped_names(tmp_path: Path) -> None:
    for spec in ("csv:no-such-trace.csv", f"csv:{tmp_path}"):  # missing; a folder
        with pytest.raises(ConfigError) as caught:
            make_provider(spec)
        message = str(caught.value)
        assert "\n" not in message and "csv:GB_2022" in message and "csv:US-CAL-CISO_2022" in message, message


def test_greentrain_run_reads_a_shipped_trace_from_another_directory(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "greentrain", "run", "--policy", "run-now", "--zone", "GB", "--provider",
            "csv:GB_2022", "--no-measure", "--interval-s", "0.05", "--", sys.executable, "-c", "print('ran')"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=50, cwd=tmp_path,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "ran" in proc.stdout and "a replayed trace (GB_2022_hourly.csv)" in proc.stderr
