"""``greentrain daemon``: run the privileged GPU-knob helper (normally under systemd, as root)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import replace
from pathlib import Path

import click

from greentrain.errors import ConfigError

__all__ = ["daemon"]

DEFAULT_CONFIG = Path("/etc/greentrain/daemon.toml")


def _load(config_path: Path | None, socket: Path | None, group: str | None, state_dir: Path | None):
    from greentrain.daemon.config import DaemonConfig, load_config

    if config_path is not None:
        config = load_config(config_path)
    elif DEFAULT_CONFIG.exists():
        config = load_config(DEFAULT_CONFIG)
    else:
        config = DaemonConfig()
    overrides = {k: v for k, v in {"socket": socket, "group": group, "state_dir": state_dir}.items() if v is not None}
    return replace(config, **overrides)


def _gpus(fake_gpus: str | None, state_dir: Path) -> list:
    if fake_gpus:  # demos and tests: file-backed doubles, settings kept under the state dir
        from greentrain.actuators.fake import FileBackedGPU

        model, _, count = fake_gpus.partition(":")
        try:
            n = int(count or "1")
        except ValueError:
            raise click.BadParameter(f"{fake_gpus!r}: expected MODEL:COUNT, e.g. a40:2", param_hint="--fake-gpus") from None
        state_dir.mkdir(parents=True, exist_ok=True)
        return [FileBackedGPU(state_dir / f"fake-gpu{i}.json", model, index=i) for i in range(n)]
    from greentrain.device.discovery import discover

    devices = discover(None, rapl_root=None, estimate_cpu=False)
    if not devices.gpus:
        reasons = "; ".join(devices.notes) or "no NVIDIA GPU found"
        raise ConfigError(f"greentrain daemon: no GPU to manage ({reasons})")
    return devices.gpus


@click.command("daemon")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False),
              help=f"TOML config (default {DEFAULT_CONFIG} if it exists).")
@click.option("--socket", type=click.Path(path_type=Path), help="Unix socket path (overrides daemon.socket).")
@click.option("--group", help="Group whose members may connect (overrides daemon.group).")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), help="Journal/lock directory.")
@click.option("--check", is_flag=True, help="Validate the config, print it, and exit.")
@click.option("--fake-gpus", hidden=True, help="MODEL:COUNT file-backed fake GPUs (demos/tests).")
@click.option("-v", "--verbose", is_flag=True, help="Log every request outcome.")
def daemon(config_path: Path | None, socket: Path | None, group: str | None, state_dir: Path | None,
           check: bool, fake_gpus: str | None, verbose: bool) -> None:
    """Own the GPU power-limit and clock knobs for unprivileged training jobs.

    Jobs connect over a Unix socket (members of the configured group only),
    ask for settings within the configured limits, and get them restored as
    soon as they reset, exit or die. Run as root, e.g. via the systemd unit
    in integrations/systemd/.
    """
    config = _load(config_path, socket, group, state_dir)
    if check:
        click.echo(f"config ok: socket={config.socket} group={config.group or '(root only)'} "
                   f"state_dir={config.state_dir} node_policy={'on' if config.node_policy else 'off'}")
        return
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="greentrain-daemon %(levelname)s %(message)s")
    from greentrain.daemon.nodepolicy import NodePolicyRunner, build_intensity_fn
    from greentrain.daemon.server import DaemonServer

    if os.geteuid() != 0 and not fake_gpus:
        click.echo("greentrain daemon: warning: not running as root; the driver will refuse GPU changes", err=True)
    server = DaemonServer(_gpus(fake_gpus, config.state_dir), config)
    runner = None
    if config.node_policy is not None:
        runner = NodePolicyRunner(config.node_policy, build_intensity_fn(config.node_policy), server.set_node_cap)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    try:
        if runner is not None:
            runner.start()
        click.echo(f"greentrain daemon: serving on {config.socket}", err=True)
        while not stop.wait(1.0):
            pass
    finally:
        if runner is not None:
            runner.stop()
        server.shutdown()
        click.echo("greentrain daemon: stopped, all GPU settings restored", err=True)
