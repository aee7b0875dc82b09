"""The demo's replay clock stands still while held and runs at the speed-up otherwise."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from greentrain.demo.clock import HoldableReplayClock
from greentrain.errors import ConfigError

ORIGIN = datetime(2022, 3, 14, tzinfo=UTC)


@pytest.mark.timeout(10)
def test_starts_held_and_holds_exclude_real_time() -> None:
    clock = HoldableReplayClock(ORIGIN, speedup=1000.0)
    assert clock.held
    time.sleep(0.05)
    assert clock.now() == ORIGIN, "a held clock must not advance"
    clock.release()
    time.sleep(0.05)
    clock.hold()
    ran_s = (clock.now() - ORIGIN).total_seconds()
    assert 40 <= ran_s <= 1000 * 2.0, ran_s  # ~50 simulated seconds; generous upper bound for a busy machine
    time.sleep(0.05)
    assert (clock.now() - ORIGIN).total_seconds() == ran_s, "time held again must not count"


@pytest.mark.timeout(10)
def test_sleep_runs_the_clock_scaled_and_holds_it_again() -> None:
    clock = HoldableReplayClock(ORIGIN, speedup=3600.0)
    stop = threading.Event()
    started = time.monotonic()
    assert clock.sleep(3600.0, stop) is False  # one simulated hour: ~1 real second
    assert time.monotonic() - started < 5.0
    assert clock.held, "a wait is job time; what follows it (training, plumbing) is not"
    slept_s = (clock.now() - ORIGIN).total_seconds()
    assert slept_s >= 3600.0
    time.sleep(0.05)
    assert (clock.now() - ORIGIN).total_seconds() == slept_s
    stop.set()
    assert clock.sleep(3600.0, stop) is True, "a set stop event interrupts the sleep"


def test_a_step_advances_a_fixed_simulated_time_whatever_it_takes_in_real_time() -> None:
    clock = HoldableReplayClock(ORIGIN, speedup=4000.0)
    for _ in range(3):
        time.sleep(0.02)  # a busy machine's slow step
        clock.advance(300.0)
    assert (clock.now() - ORIGIN).total_seconds() == pytest.approx(900.0)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ConfigError, match="speedup"):
        HoldableReplayClock(ORIGIN, speedup=0)
    with pytest.raises(ConfigError, match="origin"):
        HoldableReplayClock(datetime(2022, 3, 14), speedup=1.0)
