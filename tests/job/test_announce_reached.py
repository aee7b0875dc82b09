"""The plan line calls a provider live only when it answered at the start (``greentrain.job.announce``):
a provider that cannot be reached (a local port nobody listens on) is named with why, and the line says
what is used instead (the fallback that answered, or nothing: runs now)."""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime

import pytest

from greentrain.clock import ReplayClock
from greentrain.session import Session
from greentrain.signals import SignalChain, make_provider

pytestmark = pytest.mark.timeout(60)


def refused_url() -> str:
    """A local address where nothing listens: connecting is refused at once, no internet involved."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def plan_line(provider: object, caplog: pytest.LogCaptureFixture) -> str:
    clock = ReplayClock(datetime(2022, 3, 14, 12, tzinfo=UTC), speedup=60.0)
    with caplog.at_level(logging.INFO, logger="greentrain.report"):
        with Session("run-now", provider=provider, zone="GB", clock=clock, devices=False, steps_total=2,
                     relaunch="none", progress=False) as session:
            for _ in range(2):
                session.step()
    plans = [r.getMessage() for r in caplog.records if r.getMessage().startswith("greentrain: plan:")]
    assert len(plans) == 1
    return plans[0]


def test_an_unreachable_provider_alone_is_not_called_live(caplog: pytest.LogCaptureFixture) -> None:
    plan = plan_line(make_provider("ukgrid", api_base=refused_url()), caplog)
    assert "live" not in plan
    assert "carbon GB from ukgrid (" in plan and ("not reached" in plan or "no answer yet" in plan), plan
    assert "no carbon value until it answers (runs now, emissions unknown)" in plan


def test_an_unreachable_provider_names_the_fallback_in_use(caplog: pytest.LogCaptureFixture) -> None:
    clock = ReplayClock(datetime(2022, 3, 14, 12, tzinfo=UTC), speedup=60.0)
    chain = SignalChain([make_provider("ukgrid", api_base=refused_url(), clock=clock),
                         make_provider("static", clock=clock)], zone="GB", clock=clock, archive=False)
    plan = plan_line(chain, caplog)
    assert "live" not in plan
    assert "from ukgrid (" in plan and "using the fallback static annual averages (CodeCarbon)" in plan, plan


def test_a_replayed_trace_is_still_said_as_such(caplog: pytest.LogCaptureFixture) -> None:
    plan = plan_line("csv:GB_2022", caplog)
    assert "carbon GB from a replayed trace (GB_2022_hourly.csv)" in plan and "not reached" not in plan


def test_how_a_command_ended_is_said_from_its_status() -> None:
    from greentrain.job.announce import outcome_words

    assert outcome_words(0) == ""
    assert outcome_words(1) == "failed (exit 1)"
    assert outcome_words(130) == "stopped by SIGINT (exit 130)"
    assert outcome_words(138) == "stopped by SIGUSR1 (exit 138)"
    assert outcome_words(75) == "checkpoint saved, to resume later (exit 75)"
    assert outcome_words(250) == "failed (exit 250)"
