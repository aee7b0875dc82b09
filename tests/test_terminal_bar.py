"""The terminal bars (the demo's training bar, the engine's countdown): drawn on a terminal, nothing off one."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest

from greentrain.clock import ReplayClock
from greentrain.demo.progress import StepProgress
from greentrain.engine.countdown import Countdown
from greentrain.runtime.metrics import StepMetrics

START = datetime(2024, 3, 1, tzinfo=UTC)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Wait:
    def __init__(self, target: datetime) -> None:
        self._target = target

    @property
    def target(self) -> datetime | None:
        return self._target

    def planned_resume(self) -> datetime | None:
        return self._target


def _metrics(step: int) -> StepMetrics:
    return StepMetrics(step=step, loss=2.5, grad_norm=1.0, lr=1e-3, tokens=64, tokens_per_s=10.0,
                       step_time_s=0.1, precision="fp32")


def _on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> _Terminal:
    """stderr as a terminal, set in the test's body (pytest's capture resets sys.stderr after fixtures)."""
    out = _Terminal()
    monkeypatch.setattr("sys.stderr", out)
    return out


def test_off_a_terminal_nothing_is_drawn(capsys: pytest.CaptureFixture[str]) -> None:
    clock = ReplayClock(START, speedup=1.0)
    with StepProgress(10, 0, clock) as bar:
        bar.update(_metrics(3))
        assert not bar.drawn
    with Countdown(_Wait(START + timedelta(hours=2)), clock, None, "cleaner later", enabled=True) as countdown:
        countdown.update()
        assert not countdown.drawn
    assert capsys.readouterr().err == ""


def test_the_training_bar_shows_steps_and_the_loss_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ReplayClock(START, speedup=1.0)
    terminal = _on_a_terminal(monkeypatch)
    with StepProgress(10, 2, clock) as bar:
        assert bar.drawn
        bar.update(_metrics(7))
    assert bar.done == 7 and not bar.drawn
    drawn = terminal.getvalue()
    assert "training" in drawn and "7/10" in drawn and "loss 2.500" in drawn


def test_the_countdown_says_the_window_and_the_deadline_and_is_not_drawn_when_disabled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _on_a_terminal(monkeypatch)
    clock = ReplayClock(START, speedup=1.0)
    wait = _Wait(START + timedelta(hours=2))
    with Countdown(wait, clock, START + timedelta(hours=10), "cleaner later", enabled=True) as countdown:
        assert countdown.drawn
        countdown.update()
        described = countdown._describe()
    assert described.startswith("waiting: run from ") and "to finish by" in described
    assert described.endswith("— cleaner later")
    with Countdown(wait, clock, None, "", enabled=False) as countdown:
        assert not countdown.drawn
