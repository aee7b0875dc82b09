"""``greentrain simulate --rate-noise``: the job's rate changes under the policy; the oracle knows it; bad
SPECs and run logs are one line naming the flag, exit 2."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from greentrain.sim.noise import parse_rate_noise
from tests.cli.test_simulate import run_cli, write_trace

pytestmark = pytest.mark.timeout(120)

BASE = ["--start", "2022-03-01T00:00Z", "--work-hours", "3", "--deadline-hours", "12", "--forecaster", "perfect",
        "--json"]
VALUES = [300, 280, 100, 90, 95, 300, 310, 320, 120, 110, 300, 300, 300, 300]


@pytest.mark.parametrize("spec, why", [
    ("steps:x:4h", "AMPLITUDE 'x' is not a number"),
    ("steps:0.95:4h", "AMPLITUDE must be in [0, 0.9]"),
    ("steps:0.5:soon", "HOLD 'soon' is not a duration"),
    ("steps:0.5", "is not steps:AMPLITUDE:HOLD[:SEED]"),
    ("jitter:0.5", "is not none, steps:AMPLITUDE:HOLD[:SEED] or runlog:PATH"),
    ("runlog:/no/such/run.jsonl", "cannot read run log /no/such/run.jsonl"),
])
def test_a_bad_spec_is_one_line_naming_the_flag(tmp_path, capsys, spec, why) -> None:
    code, out, err = run_cli(capsys, "--trace", str(write_trace(tmp_path, VALUES)), "--rate-noise", spec, *BASE)
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "--rate-noise: " in err and why in err, err


def test_a_run_log_without_steps_is_refused(tmp_path, capsys) -> None:
    log = tmp_path / "run.jsonl"
    log.write_text(json.dumps({"event": "note", "t": "2022-03-01T00:00:00Z", "message": "hi"}) + "\n")
    code, _out, err = run_cli(capsys, "--trace", str(write_trace(tmp_path, VALUES)), "--rate-noise",
                              f"runlog:{log}", *BASE)
    assert code == 2 and "has no step events" in err and err.strip().count("\n") == 0


def test_noise_is_seeded_and_the_oracle_is_scored_on_the_realised_rate(tmp_path, capsys) -> None:
    trace = write_trace(tmp_path, VALUES)
    docs = []
    for _ in range(2):
        code, out, _ = run_cli(capsys, "--trace", str(trace), "--rate-noise", "steps:0.5:2h:7", *BASE)
        assert code == 0
        docs.append(json.loads(out))
    assert docs[0] == docs[1], "the same SEED, the same realised rate"
    summary = docs[0]["summary"]
    assert summary["rate_noise"] == "steps:0.5:2h:7" and summary["deadlines_missed"] == 0
    assert summary["oracle_emissions_g"] <= summary["emissions_g"] + 1e-9
    profile = parse_rate_noise("steps:0.5:2h:7").profile(datetime(2022, 3, 1, tzinfo=UTC), 12 * 3600)
    assert len(set(profile.rates)) > 1 and all(0.5 <= r <= 1.5 for r in profile.rates)


def test_a_run_log_is_replayed_as_its_hourly_rates(tmp_path) -> None:
    log = tmp_path / "run.jsonl"
    rows = [{"event": "step", "t": f"2022-03-01T{h:02d}:{m:02d}:00Z", "duration_s": 60.0 if h == 0 else 120.0}
            for h in range(2) for m in range(0, 60, 10)]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n{cut line\n")
    profile = parse_rate_noise(f"runlog:{log}").profile(datetime(2022, 3, 1, tzinfo=UTC), 3600)
    assert profile.rate_at(0) == pytest.approx(90 / 60) and profile.rate_at(4000) == pytest.approx(90 / 120)
    assert profile.rate_at(7300) == profile.rate_at(100), "repeated when the job outlasts the log"
