"""Advisory mode: a whole power-aware Session decides, logs, exports and reports, and writes nothing.

The GPU is the pynvml-level fake behind the production ``NVMLGPU``, so "untouched" is checked on the
NVML call log itself: no setter or resetter is ever called, no journal or lock file appears, and the
power limit stays where it was, while the run log and /metrics carry every decision.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from gt_engine_doubles import TraceSignals, hourly

from greentrain.actuators.advisory import AdvisoryActuators, resolve_actuation, without_knobs
from greentrain.clock import FrozenClock
from greentrain.device import discover
from greentrain.device.profiles import load_gpu_profile
from greentrain.errors import ConfigError
from greentrain.events import read_events
from greentrain.policies.base import Action, Decision
from greentrain.session import Session
from greentrain.testing.fake_nvml import FakeNVML, FakeNVMLDevice

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2024, 3, 1, tzinfo=UTC)
BASE_STEP_S = 2.0
STEPS = 30
WRITES = ("Set", "Reset", "Clear")


def nvml_writes(fake: FakeNVML) -> list[str]:
    return [name for name, _index, _args in fake.calls if any(w in name for w in WRITES)]


def known_optimum_w() -> float:
    """The shipped A40 profile's least-energy limit for ResNet-50 (what an energy-minded policy should advise)."""
    points = load_gpu_profile("a40").points("imagenet/resnet50")
    return min(points, key=lambda p: p.energy_per_epoch_j).power_limit_w


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENTRAIN_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.setenv("GREENTRAIN_STATE_DIR", str(tmp_path / "default-state"))
    monkeypatch.delenv("GREENTRAIN_ADVISE_ONLY", raising=False)


def fake_node(clock: FrozenClock) -> tuple[FakeNVML, object]:
    fake = FakeNVML([FakeNVMLDevice("a40", time_fn=lambda: clock.now().timestamp())])
    fake.nvmlInit()
    return fake, discover(None, nvml=fake, rapl_root=None, estimate_cpu=False)


def run_session(tmp_path: Path, clock: FrozenClock, fake: FakeNVML, devices: object, *, scrape: bool = True,
                **kwargs) -> tuple[Session, str]:
    signals = TraceSignals(hourly(T0, [200.0] * 100), clock)
    session = Session("carbon-aware", provider=signals, deadline="+48", steps_total=STEPS, clock=clock,
                      devices=devices, relaunch="none", pause_mode="suspend", progress=False, decide_interval_s=1,
                      jsonl=tmp_path / "run.jsonl", state_dir=tmp_path / "state", power=True,
                      profile_cache_dir=tmp_path / "cache", metrics_port=0 if scrape else None, **kwargs)
    text = ""
    with session:
        for _ in range(STEPS):
            clock.advance(fake.gpus[0].step_time_s(BASE_STEP_S))
            decision = session.step(tokens=8)
            assert decision.power_limit_w is None and decision.precision is None  # the loop acts on timing only
        if scrape:
            text = httpx.get(f"http://127.0.0.1:{session.metrics.port}/metrics", timeout=10).text
    return session, text


def sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exported")


def test_whole_power_aware_session_advises_and_writes_nothing(tmp_path: Path) -> None:
    clock = FrozenClock(T0)
    fake, devices = fake_node(clock)
    limit_before = fake.gpus[0].power_limit_w()
    optimum_w = known_optimum_w()
    session, metrics = run_session(tmp_path, clock, fake, devices, actuation="advise")
    assert session.actuation == "advise" and session.finished
    # untouched: no NVML write, no journal or lock file, the limit where it was
    assert nvml_writes(fake) == []
    assert not (tmp_path / "state").exists() or list((tmp_path / "state").iterdir()) == []
    assert fake.gpus[0].power_limit_w() == limit_before and fake.gpus[0].set_calls == []
    # reported: the run log
    events = read_events(tmp_path / "run.jsonl")
    points = [e for e in events if e["event"] == "operating_points"]
    assert len(points) == 1 and points[0]["source"] == "estimated"
    advice = [e for e in events if e["event"] == "advice"]
    assert advice and advice[-1]["power_limit_w"] == optimum_w
    assert advice[-1]["current_power_limit_w"] == limit_before
    estimate = advice[-1]["estimate"]
    assert estimate["source"] == "estimated" and estimate["points"] == "estimated"
    assert estimate["energy_change"] < 0 < estimate["time_change"]  # less energy per unit of work, slower
    assert all(e["applied"] == [] for e in events if e["event"] == "action")
    summary = [e for e in events if e["event"] == "summary"][-1]
    assert summary["advice"]["power_limit_w"] == optimum_w and summary["advice"]["applied"] == 0
    assert summary["advice"]["energy_change"] == pytest.approx(estimate["energy_change"])
    # reported: the metrics
    assert sample(metrics, "greentrain_job_advised_power_limit_watts") == optimum_w
    assert sample(metrics, "greentrain_job_advised_energy_change_ratio") == pytest.approx(estimate["energy_change"])
    assert sample(metrics, "greentrain_job_advised_time_change_ratio") == pytest.approx(estimate["time_change"])
    assert "greentrain_job_power_limit_watts{" not in metrics  # nothing was set
    # reported: the HTML report shows the advice and its estimated effect
    from greentrain.report import build_report

    html = Path(build_report(tmp_path / "run.jsonl", tmp_path / "report")).read_text()
    assert "Advisory mode: advised, not applied" in html
    assert f"{estimate['energy_change'] * 100:+.1f} % (estimated)" in html


def test_same_session_applying_does_write(tmp_path: Path) -> None:
    """The control: without advisory mode the same job changes the limit (so the test above can fail)."""
    clock = FrozenClock(T0)
    fake, devices = fake_node(clock)
    run_session(tmp_path, clock, fake, devices, scrape=False)
    assert "nvmlDeviceSetPowerManagementLimit" in nvml_writes(fake)


def test_env_switch_forces_advice_over_an_explicit_apply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENTRAIN_ADVISE_ONLY", "1")
    clock = FrozenClock(T0)
    fake, devices = fake_node(clock)
    session, _ = run_session(tmp_path, clock, fake, devices, scrape=False, actuation="apply")
    assert session.actuation == "advise" and nvml_writes(fake) == []
    assert any(e["event"] == "advice" for e in read_events(tmp_path / "run.jsonl"))


@pytest.mark.parametrize(("env", "actuation", "expected"), [
    ("", None, "apply"), ("0", "advise", "advise"), ("1", None, "advise"), ("true", "apply", "advise"),
])
def test_resolve_actuation(monkeypatch: pytest.MonkeyPatch, env: str, actuation: str | None, expected: str) -> None:
    monkeypatch.setenv("GREENTRAIN_ADVISE_ONLY", env)
    assert resolve_actuation(actuation) == expected


def test_bad_actuation_values_name_the_input(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="actuation: 'dry-run'"):
        resolve_actuation("dry-run")
    monkeypatch.setenv("GREENTRAIN_ADVISE_ONLY", "sometimes")
    with pytest.raises(ConfigError, match="GREENTRAIN_ADVISE_ONLY='sometimes'"):
        resolve_actuation(None)


def test_clock_and_precision_decisions_are_advised_not_applied() -> None:
    clock = FrozenClock(T0)
    fake, devices = fake_node(clock)
    gpu = devices.gpus[0]

    class Precision:
        current = "fp32"

        def request(self, precision: str) -> bool:  # pragma: no cover - must never be called
            raise AssertionError("advisory mode switched precision")

    actuators = AdvisoryActuators([gpu], precision=Precision())
    top = max(gpu.supported_sm_clocks_mhz())
    decision = Decision(sm_clocks_mhz=(210, top), precision="bf16", power_limit_w=5000.0)
    assert actuators.apply(decision) == []
    advice = actuators.history[-1]
    assert advice["sm_clocks_mhz"] == [210, top] and advice["precision"] == "bf16"
    assert advice["current_precision"] == "fp32"
    assert "outside its constraints" in advice["invalid_power_limit"]  # checked by reading, not by trying
    assert nvml_writes(fake) == [] and actuators.restore_all() == [] and actuators.unrestored_count() == 0
    stripped = without_knobs(Decision(action=Action.PAUSE, until=T0, precision="bf16", power_limit_w=200.0))
    assert (stripped.action, stripped.until, stripped.precision, stripped.power_limit_w) == (Action.PAUSE, T0,
                                                                                           None, None)
