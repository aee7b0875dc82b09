"""``greentrain monitor``: measure energy while a command runs, for a duration, or until Ctrl-C.

    greentrain monitor -- python train.py --epochs 1
    greentrain monitor --duration-s 60 --jsonl run.jsonl --json

Prints per-device joules, average watts and the source of each figure; the
command's exit status is passed through. The command is started from an
argument list (never a shell string).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:
    from greentrain.device.base import GPU
    from greentrain.exporters.server import MetricsServer
    from greentrain.monitor import Monitor

import click

from greentrain.cli.jobflags import job_flags, job_options, take_settings
from greentrain.errors import ConfigError

__all__ = ["monitor", "select_gpus"]


def select_gpus(gpus: Sequence[GPU], selectors: Sequence[str], notes: Sequence[str]) -> list[GPU]:
    """GPUs matching ``--gpu`` values (NVML index or UUID prefix); ConfigError naming an unknown one."""
    if not selectors:
        return list(gpus)
    gpu_notes = [n for n in notes if "GPU" in n]
    found = ", ".join(f"{g.index} ({g.uuid})" for g in gpus) or "none" + (
        f" ({'; '.join(gpu_notes)})" if gpu_notes else ""
    )
    chosen: list[GPU] = []
    for selector in selectors:
        text = selector.strip()
        hits = [
            g
            for g in gpus
            if (text.isdigit() and g.index == int(text))
            or (not text.isdigit() and g.uuid.lower().startswith(text.lower()))
        ]
        if len(hits) != 1:
            why = "matches several GPUs" if hits else "is not a GPU visible to this process"
            raise ConfigError(f"--gpu {selector}: {why}; GPUs found: {found}; see `greentrain doctor`")
        if hits[0] not in chosen:
            chosen.append(hits[0])
    return chosen


def _check_command(command: Sequence[str]) -> None:
    program = command[0]
    if os.sep in program:
        ok = Path(program).is_file() and os.access(program, os.X_OK)
    else:
        ok = shutil.which(program) is not None
    if not ok:
        fix = "check the spelling, your PATH, or give the full path"
        raise ConfigError(f"CMD: command {program!r} not found or not executable; {fix}")


def _run_command(command: Sequence[str]) -> int:
    """Run ``command`` to completion; SIGTERM is forwarded; Ctrl-C reaches it through the terminal."""
    child = subprocess.Popen(list(command))
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    try:
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:  # the child got the same SIGINT; wait for it to finish
                continue
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 128 - code if code < 0 else code


def _wait(duration_s: float | None) -> None:
    """Sleep ``duration_s`` (or forever) until Ctrl-C / SIGTERM."""
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait(duration_s)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


class DeviceRow(TypedDict):
    """One device in ``greentrain monitor``'s report."""

    device: str
    kind: str
    model: str | None
    index: int | None
    uuid: str | None
    energy_j: float
    average_power_w: float
    source: str
    scope: str
    failed: bool
    error: str | None


class MonitorReport(TypedDict):
    """``greentrain monitor``'s report (``--json`` prints it as is)."""

    duration_s: float
    total_energy_j: float
    average_power_w: float
    source: str
    devices: list[DeviceRow]
    notes: list[str]
    command: NotRequired[list[str]]
    exit_code: NotRequired[int | None]


def _report(mon: Monitor, notes: list[str], exit_code: int | None, command: Sequence[str]) -> MonitorReport:
    duration_s = mon.elapsed_s()
    devices: list[DeviceRow] = []
    total_j: float = 0  # an int 0 with no device, as sum() gave
    for r in mon.readings():
        total_j += r.energy_j
        avg_w = r.energy_j / duration_s if duration_s > 0 else 0.0
        devices.append({
            "device": r.name, "kind": r.kind, "model": r.model, "index": r.index, "uuid": r.uuid,
            "energy_j": r.energy_j, "average_power_w": avg_w, "source": r.source.value,
            "scope": "whole host" if r.kind == "cpu" else "whole GPU",
            "failed": r.failed, "error": r.error,
        })  # fmt: skip
    if command and devices:  # a reading covers its whole device, whatever else runs there
        notes = [*notes, f"every figure covers a whole device (the host's CPUs, each GPU) with all the processes on "
                         f"it, not {command[0]} alone; an idle command shows the machine's own draw"]
    report: MonitorReport = {
        "duration_s": duration_s,
        "total_energy_j": total_j,
        "average_power_w": total_j / duration_s if duration_s > 0 else 0.0,
        "source": mon.source().value,
        "devices": devices,
        "notes": notes + mon.notes,
    }
    if command:
        report["command"] = list(command)
        report["exit_code"] = exit_code
    return report


def _render(report: MonitorReport, to_stderr: bool) -> None:
    from rich.console import Console

    from greentrain.cli.tables import print_table
    from greentrain.units import format_duration_s, format_energy_j

    rows = [[d["device"], d["model"] or "", d["scope"], format_energy_j(d["energy_j"], with_wh=False),
             f"{d['average_power_w']:.1f}", d["source"], f"FAILED: {d['error']}" if d["failed"] else "ok"]
            for d in report["devices"]]
    rows.append(["total", "", "", format_energy_j(report["total_energy_j"], with_wh=False),
                 f"{report['average_power_w']:.1f}", report["source"], ""])
    console = Console(stderr=to_stderr)
    print_table(console, f"energy over {format_duration_s(report['duration_s'])}",
                ("device", "model", "covers", "energy", "avg W", "source", "status"), rows,
                right=("energy", "avg W"))
    for note in report["notes"]:
        console.print(f"note: {note}", markup=False)


def _start_metrics(port: int | None, addr: str, mon: Monitor, job: str,
                   allow_public: bool = False) -> MetricsServer | None:
    if port is None:
        return None
    from greentrain import plugins

    try:
        MetricsServer = plugins.load("exporters", "prometheus")  # noqa: N806 - a class from the plugin family
    except ConfigError as e:
        raise ConfigError(f"--metrics-port: {e}") from None
    server = MetricsServer(job=job, monitor=mon, addr=addr, port=port, allow_public=allow_public)
    try:
        server.start()
    except OSError as e:
        raise ConfigError(
            f"--metrics-port {port}: cannot listen on {addr}:{port} ({e.strerror}); choose a free port"
        ) from None
    click.echo(f"greentrain: serving Prometheus metrics on http://{addr}:{server.port}/metrics", err=True)
    return server


@click.command("monitor", context_settings={"allow_interspersed_args": False})
@click.option("--interval-s", default="0.1", show_default=True, metavar="SECONDS", help="Sampling interval in seconds.")
@click.option(
    "--duration-s", default=None, metavar="SECONDS", help="Measure for this many seconds (instead of a command)."
)
@click.option(
    "--jsonl", type=click.Path(dir_okay=False), default=None, help="Append 'sample' events to this JSONL log."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object on stdout.")
@click.option(
    "--gpu",
    "gpu_selectors",
    multiple=True,
    help="GPU to measure: NVML index (as nvidia-smi numbers it) or UUID prefix; repeatable. Default: all visible.",
)
@job_flags("monitor")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- CMD ARGS...]")
def monitor(
    interval_s: str, duration_s: str | None, jsonl: str | None, as_json: bool, gpu_selectors: tuple[str, ...],
    command: tuple[str, ...], **settings: object,
) -> None:  # fmt: skip
    """Measure energy while CMD runs (or for --duration-s, or until Ctrl-C); exit with CMD's status."""
    from greentrain.cli.doctor import rapl_root_from_env
    from greentrain.device import discover
    from greentrain.events import EventLog
    from greentrain.monitor import Monitor, validate_interval_s

    # Validated here rather than by click types so every mistake is one line naming the option.
    interval = validate_interval_s(interval_s, "--interval-s")
    duration = None if duration_s is None else validate_interval_s(duration_s, "--duration-s")
    if command and duration is not None:
        raise ConfigError("--duration-s: give either a command to measure or --duration-s, not both")
    metrics = job_options(take_settings(settings, "monitor"))  # the metrics flags: the job's checks
    if command:
        _check_command(command)
    with discover(rapl_root=rapl_root_from_env()) as devices:
        gpus = select_gpus(devices.gpus, gpu_selectors, devices.notes)
        event_log = EventLog(jsonl) if jsonl else None
        mon = Monitor(gpus, devices.cpus, interval_s=interval, event_log=event_log)
        server = None
        exit_code: int | None = None
        try:
            mon.start()
            server = _start_metrics(metrics.metrics_port, metrics.metrics_addr, mon,
                                    Path(command[0]).name if command else "monitor", metrics.metrics_allow_public)
            if command:
                exit_code = _run_command(command)
            else:
                _wait(duration)
        finally:
            mon.stop()
            if server is not None:
                server.stop()
        report = _report(mon, list(devices.notes), exit_code, command)
        if event_log is not None:
            from greentrain.clock import SystemClock

            event_log.write("summary", SystemClock().now(), energy_j=report["total_energy_j"],
                            duration_s=report["duration_s"], source=report["source"])  # fmt: skip
            event_log.close()
    if as_json:
        click.echo(json.dumps(report))
    else:
        _render(report, to_stderr=bool(command))
    if exit_code:
        raise SystemExit(exit_code)
