"""``greentrain exporter``: node exporter mode, every GPU and CPU energy domain of this host, no job.

Run one per GPU node next to dcgm-exporter; its ``gpu``/``UUID`` labels join
with dcgm-exporter's. Training jobs serve their own job endpoint with
``--metrics-port`` instead.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

import click

from greentrain.cli.jobflags import job_flags, job_options, take_settings

__all__ = ["DEFAULT_PORT", "exporter"]

DEFAULT_PORT = 9877


def _devices(fake_gpus: tuple[str, ...]) -> object:
    from greentrain.device.discovery import DeviceSet, discover

    if not fake_gpus:
        return discover(cuda_visible_devices=None)  # the whole node, whatever this shell's CUDA_VISIBLE_DEVICES
    from greentrain.testing import FakeCPUDomain
    from greentrain.testing.fake_backend import FakeBackend, parse_fake_gpus

    notes = ["simulated devices (--fake-gpu)"]
    gpus = FakeBackend(parse_fake_gpus(",".join(fake_gpus), "--fake-gpu")).discover(None, notes)
    return DeviceSet(gpus=gpus, cpus=[FakeCPUDomain("package-0")], notes=notes)


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(1.0):
            pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@click.command("exporter")
@job_flags("exporter", defaults={"metrics_port": DEFAULT_PORT})
@click.option("--pushgateway", default=None, metavar="URL",
              help="Also push metrics to this Pushgateway (grouped by job and instance).")
@click.option("--job", default="greentrain-node", show_default=True,
              help="Pushgateway job name (the pull endpoint exports no job series).")
@click.option("--interval-s", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Device sampling interval, seconds.")
@click.option("--fake-gpu", "fake_gpus", multiple=True, metavar="MODEL",
              help="Simulate a GPU from a measured profile (v100, a40, rtx6000) instead of NVML; repeatable.")
def exporter(pushgateway: str | None, job: str, interval_s: float, fake_gpus: tuple[str, ...],
             **settings: object) -> None:
    """Serve Prometheus metrics for every GPU and CPU energy domain of this node until SIGINT/SIGTERM."""
    metrics = job_options(take_settings(settings, "exporter"))  # the metrics flags: the job's checks
    from greentrain import plugins
    from greentrain.monitor import Monitor

    MetricsServer = plugins.load("exporters", "prometheus")  # noqa: N806 - the exporters plugin family's entries
    PushgatewayConfig = plugins.load("exporters", "pushgateway")  # noqa: N806

    logging.basicConfig(level=logging.WARNING, format="greentrain: %(levelname)s: %(message)s")
    devices = _devices(fake_gpus)
    monitor = Monitor.from_devices(devices, interval_s=interval_s)  # type: ignore[arg-type]
    server = MetricsServer(job=job, monitor=monitor, addr=metrics.metrics_addr,
                           port=metrics.metrics_port,
                           allow_public=metrics.metrics_allow_public,
                           pushgateway=PushgatewayConfig(url=pushgateway) if pushgateway else None)
    monitor.start()
    try:
        server.start()
        for note in [*getattr(devices, "notes", []), *monitor.notes]:
            click.echo(f"greentrain: note: {note}", err=True)
        click.echo(f"greentrain: serving node metrics on {server.url}", err=True)
        _wait_for_signal()
    finally:
        server.stop()
        monitor.stop()
        close = getattr(devices, "close", None)
        if callable(close):
            close()
