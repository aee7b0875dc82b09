"""Reliability under hostile input: carbon APIs, reflected secrets, the privileged daemon (issue 17, items 3-5).

Counts, not timings in tests: every figure here is measured in this run.

- Hostile carbon APIs: every live provider (electricitymaps, watttime, ukgrid)
  against every scenario of tests/signals/gt_hostile_server.py (nested JSON,
  400-digit numbers, years 0001/9999, redirects with JSON bodies, gzip bomb,
  byte-drip bodies/headers, ...), latest + forecast + history per round.
  Reports calls, SignalErrors, any other exception (a traceback through the
  CLI), the slowest call as a multiple of its deadline, and the peak memory
  growth of the gzip bomb.
- Training never blocks: a Session on ukgrid whose server holds its answer;
  time spent in ``__enter__`` and in the first steps.
- Secrets: the reflected-credentials canary over every provider and status;
  texts checked and secret fragments (>= 6 characters, any encoding) found.
- Daemon: malformed requests (error replies, thread deaths), 256 simultaneous
  connects, a flood of idle connections (threads, open connections, refused),
  a foreign GPU request.

    PYTHONPATH=$PWD python benchmarks/reliability.py [--rounds 3] [--idle 3000] [--fuzz 2000] [--baseline DIR]

``--baseline DIR`` runs the API and session parts again with greentrain imported from DIR (the code
before this change) in a subprocess, so both sets of figures come from one run on one machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from greentrain.errors import SignalError  # noqa: E402

CREDENTIALS = {"ELECTRICITYMAPS_TOKEN": "em-bench-token-Qm3Lr9Xa", "WATTTIME_USER": "alice",
               "WATTTIME_PASSWORD": "wt-bench-pass-Hy6Tn2Wd"}
DEADLINE_S = 0.5


def hostile_apis(rounds: int, calls_per_case: str = "latest,forecast,history") -> dict:
    from greentrain.clock import FrozenClock
    from greentrain.signals import make_provider
    from tests.signals.gt_hostile_server import PROVIDER_ZONES, SCENARIOS, HostileServer

    from tests.signals.gt_hostile_server import bomb

    bomb()  # built once before timing: the server's compression time is not the client's
    now = datetime(2026, 11, 23, 10, 5, tzinfo=UTC)
    calls = signal_errors = over_1_5x = 0
    other: dict[str, int] = {}
    worst_ratio, worst = 0.0, ""
    for _ in range(rounds):
        for name, zone in PROVIDER_ZONES.items():
            for scenario in SCENARIOS:
                with HostileServer(name, scenario) as server:
                    provider = make_provider(name, clock=FrozenClock(now), api_base=server.url, timeout_s=DEADLINE_S)
                    every = {"latest": lambda: provider.latest(zone),
                             "forecast": lambda: provider.forecast(zone, 24.0),
                             "history": lambda: provider.history(zone, now - timedelta(hours=3), now)}
                    for call in (every[c] for c in calls_per_case.split(",")):
                        started = time.monotonic()
                        try:
                            call()
                            other["no error"] = other.get("no error", 0) + 1
                        except SignalError:
                            signal_errors += 1
                        except Exception as e:  # noqa: BLE001 - counted: the defect this measures
                            other[type(e).__name__] = other.get(type(e).__name__, 0) + 1
                        elapsed = time.monotonic() - started
                        calls += 1
                        over_1_5x += elapsed > 1.5 * DEADLINE_S
                        if elapsed / DEADLINE_S > worst_ratio:
                            worst_ratio, worst = elapsed / DEADLINE_S, f"{name}/{scenario}"
                    provider.close()
    with HostileServer("ukgrid", "gzip-bomb") as server:
        provider = make_provider("ukgrid", api_base=server.url, timeout_s=DEADLINE_S)
        tracemalloc.start()
        try:
            provider.latest("GB")
        except SignalError:
            pass
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        provider.close()
    return {"calls": calls, "signal_errors": signal_errors, "other_outcomes": other,
            "scenarios": len(SCENARIOS), "providers": len(PROVIDER_ZONES),
            "slowest_call_over_deadline": round(worst_ratio, 3), "slowest": worst,
            "calls_over_1_5x_deadline": over_1_5x,
            "gzip_bomb_peak_alloc_mib": round(peak / 2**20, 2)}


def session_blocking() -> dict:
    from greentrain import Session
    from greentrain.signals.providers.ukgrid import UKGridProvider
    from tests.signals.gt_hostile_server import HostileServer

    with Session("run-now", steps_total=1, devices=False, relaunch="none", progress=False) as warm:
        warm.step()  # the first Session in a process pays for imports; measure the network part only
    release = threading.Event()

    def held(conn) -> None:
        release.wait(60)
        conn.respond(503, b"{}")

    with HostileServer("ukgrid", writer=held) as server:
        provider = UKGridProvider(api_base=server.url, timeout_s=30.0)
        started = time.monotonic()
        with Session("run-now", provider=provider, zone="GB", steps_total=100, devices=False, relaunch="none",
                     progress=False) as session:
            enter_s = time.monotonic() - started
            step_s = []
            for _ in range(20):
                t = time.monotonic()
                session.step(tokens=1)
                step_s.append(time.monotonic() - t)
            stale = getattr(session.engine.signals, "stale", None)  # None: a tree without the flag
            release.set()
    return {"provider_deadline_s": 30.0, "enter_s": round(enter_s, 3), "first_step_s": round(step_s[0], 3),
            "max_step_s": round(max(step_s), 3), "steps": len(step_s), "stale_flag": stale}


class _LogCapture(logging.Handler):
    """Stands in for pytest's caplog: every log record of the run, formatted."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    @contextlib.contextmanager
    def at_level(self, level: int):
        root = logging.getLogger()
        old = root.level
        root.setLevel(level)
        root.addHandler(self)
        try:
            yield
        finally:
            root.removeHandler(self)
            root.setLevel(old)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def secret_canary() -> dict:
    """The canary test's own collectors (one definition of "every path"), counted here."""
    from tests.signals.gt_hostile_server import PROVIDER_ZONES, HostileServer, echo_credentials
    from tests.signals.test_secret_canary import SECRETS, STATUSES, USER, _collect_provider_texts, _leaks

    os.environ.update(SECRETS, WATTTIME_USER=USER)
    texts = leaks = cases = 0
    with tempfile.TemporaryDirectory(prefix="gt-canary-") as name:
        for provider in PROVIDER_ZONES:
            for status in STATUSES:
                capture = _LogCapture()
                with HostileServer(provider, writer=echo_credentials(status)) as server:
                    collected = _collect_provider_texts(provider, server.url, Path(name), capture)
                cases += 1
                texts += len(collected)
                leaks += sum(len(_leaks(t)) for t in collected)
    os.environ.update(CREDENTIALS)
    return {"cases": cases, "texts_checked": texts, "secret_fragments_found": leaks}


def _connect_at_once(socket_path: Path, clients: int) -> list[bool]:
    """``clients`` threads connect together (a barrier) and ask ``status``; True for each one served."""
    from greentrain.daemon.client import DaemonClient

    served: list[bool] = []
    barrier = threading.Barrier(clients)

    def one() -> None:
        barrier.wait()
        try:
            with DaemonClient(socket_path, job="bench") as client:
                served.append(bool(client.status()["ok"]))
        except Exception:  # noqa: BLE001 - counted as not served
            served.append(False)

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return served


def _daemon(tmp: Path, **config):
    from greentrain.daemon.config import DaemonConfig
    from greentrain.daemon.server import DaemonServer
    from greentrain.testing import FileBackedGPU

    gpus = [FileBackedGPU(tmp / f"gpu{i}.json", "a40", index=i) for i in range(2)]
    server = DaemonServer(gpus, DaemonConfig(socket=tmp / "d.sock", state_dir=tmp / "state", **config))
    server.start()
    return server, gpus


def _flood(server, idle: int) -> dict:
    """``idle`` connections that say nothing: threads before/after, connections open, refused."""
    threads_before = threading.active_count()
    flood = []
    for _ in range(idle):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(server.config.socket))
        flood.append(s)
    deadline = time.monotonic() + 30
    while server.loop.served + sum(server.loop.refused.values()) < idle and time.monotonic() < deadline:
        time.sleep(0.05)
    result = {"connections": idle, "threads_before": threads_before, "threads_after": threading.active_count(),
              "open": server.loop.open_connections, "refused": dict(server.loop.refused),
              "cap_total": server.config.max_connections, "cap_per_uid": server.config.max_connections_per_uid}
    for s in flood:
        s.close()
    return result


def daemon(fuzz: int, idle: int) -> dict:
    from tests.daemon.gt_hostile_lines import HOSTILE_LINES, mutations

    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="gt-rel-") as name:
        tmp = Path(name)
        server, gpus = _daemon(tmp)
        seed = random.randrange(1 << 30)
        lines = HOSTILE_LINES + mutations(fuzz, seed=seed)
        errors = oks = 0
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.connect(str(server.config.socket))
            raw.settimeout(10)
            reader = raw.makefile("rb")
            for line in lines:
                raw.sendall(line + b"\n")
                reply = json.loads(reader.readline())
                errors += reply["ok"] is False
                oks += reply["ok"] is True
        result["malformed"] = {"requests": len(lines), "seed": seed, "error_replies": errors, "accepted_valid": oks,
                               "loop_thread_alive": server.serving}
        served = [ok for _ in range(3) for ok in _connect_at_once(server.config.socket, 256)]
        result["simultaneous_256"] = {"rounds": 3, "served": sum(served), "attempted": len(served)}
        server.shutdown()

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * idle + 1000)), hard))
        for label, caps in (("idle_flood_default_caps", {}),
                            ("idle_flood_caps_above_flood", {"max_connections": idle + 10,
                                                             "max_connections_per_uid": idle + 10})):
            server, gpus = _daemon(tmp, **caps)
            result[label] = _flood(server, idle)
            if label.endswith("above_flood"):
                break
            server.shutdown()
        client_code = ("import sys\nfrom greentrain.daemon.client import DaemonClient\n"
                       "from greentrain.errors import PrivilegeError\n"
                       "c = DaemonClient(sys.argv[1])\n"
                       "try:\n    c.set_power_limit_w(sys.argv[2], 200); print('accepted')\n"
                       "except PrivilegeError:\n    print('refused')\n")
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="0")
        refused = 0
        for _ in range(10):
            out = subprocess.run([sys.executable, "-c", client_code, str(server.config.socket), gpus[1].uuid],
                                 env=env, capture_output=True, text=True, timeout=60)
            refused += out.stdout.strip() == "refused"
        result["foreign_gpu"] = {"requests": 10, "refused": refused, "gpu1_changed": bool(gpus[1].set_calls)}
        server.shutdown()
    return result


def daemon_public(idle: int) -> dict:
    """The same daemon checks through public API only, so they also run on the code before this change."""
    from tests.daemon.gt_hostile_lines import HOSTILE_LINES

    result: dict = {}
    with tempfile.TemporaryDirectory(prefix="gt-rel-") as name:
        tmp = Path(name)
        server, _ = _daemon(tmp)
        deaths = 0
        for line in HOSTILE_LINES:  # one connection each: does it still answer after the hostile line?
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
                raw.connect(str(server.config.socket))
                raw.settimeout(5)
                reader = raw.makefile("rb")
                try:
                    raw.sendall(line + b"\n")
                    reader.readline()
                    raw.sendall(b'{"op":"status"}\n')
                    alive = b'"ok":true' in reader.readline()
                except OSError:
                    alive = False
                deaths += not alive
        result["hostile_lines"] = {"lines": len(HOSTILE_LINES), "connections_killed": deaths}
        served = _connect_at_once(server.config.socket, 256)
        result["simultaneous_256"] = {"served": sum(served), "attempted": len(served)}
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * idle + 1000)), hard))
        before = threading.active_count()
        flood = []
        connected = 0
        for _ in range(idle):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)  # a full backlog answers EAGAIN at once instead of blocking the flood
            try:
                s.connect(str(server.config.socket))
                connected += 1
            except OSError:
                s.close()
                continue
            flood.append(s)
        time.sleep(3)  # let the daemon accept what it will
        result["idle_flood"] = {"attempted": idle, "connected": connected,
                                "daemon_threads_added": threading.active_count() - before}
        for s in flood:
            s.close()
        server.shutdown()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=int, default=3000)
    parser.add_argument("--fuzz", type=int, default=2000)
    parser.add_argument("--calls", default="latest,forecast,history", help="Provider calls per hostile case.")
    parser.add_argument("--only", default="apis,session,daemon,daemon_public,canary",
                        help="Comma-separated parts to run.")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="Also run the API and session parts with greentrain imported from this source tree "
                             "(e.g. `git archive dbef387 | tar -x -C /tmp/gt-base`), side by side.")
    args = parser.parse_args()
    os.environ.update(CREDENTIALS)
    parts = set(args.only.split(","))
    report: dict = {"when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "tree": str(Path.cwd())}
    if "apis" in parts:
        report["hostile_apis"] = hostile_apis(args.rounds, args.calls)
    if "session" in parts:
        report["session_blocking"] = session_blocking()
    if "daemon" in parts:
        report["daemon"] = daemon(args.fuzz, args.idle)
    if "daemon_public" in parts:
        report["daemon_public"] = daemon_public(args.idle)
    if "canary" in parts:
        report["secret_canary"] = secret_canary()
    if args.baseline is not None:
        here = Path(__file__).resolve().parents[1]
        env = dict(os.environ, PYTHONPATH=f"{args.baseline.resolve()}:{here}")
        # One call per case: the old code spends the whole 20 s trickle on every drip call.
        out = subprocess.run([sys.executable, __file__, "--rounds", "1", "--calls", "latest",
                              "--only", "apis,session,daemon_public",
                              "--idle", str(args.idle)],
                             env=env, capture_output=True, text=True, cwd=args.baseline)
        report["baseline"] = json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-2000:]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
