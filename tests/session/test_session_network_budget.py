"""Training never waits on a carbon API: Session.__enter__ and step() go on while the fetch hangs.

The server holds its answer until the test releases it, so any step that
returned before the release provably did not wait for the network. The
answer, once released, is picked up by a later step.
"""

from __future__ import annotations

import json
import threading
import time

from greentrain import Session
from greentrain.clock import SystemClock
from greentrain.signals import SignalChain, make_provider
from greentrain.signals.providers.ukgrid import UKGridProvider
from tests.signals.gt_hostile_server import HostileServer


def _held_until(release: threading.Event):
    def write(conn) -> None:
        release.wait(30)
        start = time.strftime("%Y-%m-%dT%H:00Z", time.gmtime())
        end = time.strftime("%Y-%m-%dT%H:59Z", time.gmtime())
        period = {"from": start, "to": end, "intensity": {"forecast": 123, "actual": 123}}
        conn.respond(200, json.dumps({"data": [period]}).encode())

    return write


def test_session_enter_and_step_do_not_wait_for_a_hung_provider():
    release = threading.Event()
    with HostileServer("ukgrid", writer=_held_until(release)) as server:
        provider = UKGridProvider(api_base=server.url, timeout_s=30.0)
        with Session("run-now", provider=provider, zone="GB", steps_total=400, devices=False, relaunch="none",
                     progress=False, decide_interval_s=0.01) as session:
            view = session.engine.signals
            session.step(tokens=1)
            session.step(tokens=1)
            assert not release.is_set()  # both returned while the answer was still held
            assert view.stale and view.last is None  # no value yet and no offline fallback: run now, marked stale
            assert view.fetcher.started == 1  # one fetch in flight, not one per step
            release.set()
            for _ in range(300):  # bounded: the released answer arrives within a few steps
                session.step(tokens=1)
                if view.last is not None:
                    break
                time.sleep(0.01)
            assert view.last is not None and view.last.provider == "ukgrid"
            assert view.last.intensity_g_per_kwh == 123 and not view.stale
    assert any(e.path == "/intensity" for e in server.exchanges)


def test_offline_fallback_serves_while_the_live_provider_hangs():
    release = threading.Event()
    with HostileServer("ukgrid", writer=_held_until(release)) as server:
        chain = SignalChain([UKGridProvider(api_base=server.url, timeout_s=30.0), make_provider("static")],
                            zone="GB", clock=SystemClock())
        with Session("run-now", provider=chain, steps_total=10, devices=False, relaunch="none",
                     progress=False) as session:
            session.step(tokens=1)
            view = session.engine.signals
            assert not release.is_set()
            assert view.last is not None and view.last.provider == "static" and view.stale
            release.set()
        chain.close()
