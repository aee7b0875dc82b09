"""``greentrain daemon``: run the privileged GPU-knob helper (normally under systemd, as root)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from greentrain.errors import ConfigError

if TYPE_CHECKING:
    from greentrain.daemon.config import DaemonConfig
    from greentrain.device.base import GPU
    from greentrain.userfile import JSONObject

__all__ = ["daemon"]

DEFAULT_CONFIG = Path("/etc/greentrain/daemon.toml")


def _load(config_path: Path | None, socket: Path | None, group: str | None, state_dir: Path | None) -> DaemonConfig:
    from greentrain.daemon.config import DaemonConfig, load_config

    if config_path is not None:
        config = load_config(config_path)
    elif DEFAULT_CONFIG.exists():
        config = load_config(DEFAULT_CONFIG)
    else:
        config = DaemonConfig()
    if socket is not None:
        config = replace(config, socket=socket)
    if group is not None:
        config = replace(config, group=group)
    if state_dir is not None:
        config = replace(config, state_dir=state_dir)
    return config


def _gpus(fake_gpus: str | None, state_dir: Path) -> list[GPU]:
    if fake_gpus:  # demos and tests: file-backed doubles, settings kept under the state dir
        from greentrain.testing.fake_backend import FakeBackend, parse_fake_gpus

        backend = FakeBackend(parse_fake_gpus(fake_gpus, "--fake-gpus"), state_dir=state_dir)
        return backend.discover(None, [])
    from greentrain.device.discovery import discover

    devices = discover(None, rapl_root=None, estimate_cpu=False)
    if not devices.gpus:
        reasons = "; ".join(devices.notes) or "no NVIDIA GPU found"
        raise ConfigError(f"greentrain daemon: no GPU to manage ({reasons})")
    return devices.gpus


def _print_status(socket: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from greentrain.daemon.client import DaemonClient

    with DaemonClient(socket) as client:
        reply = client.status()
    table = Table(title=f"greentrain daemon at {socket}")
    for column in ("GPU", "UUID", "requested W", "clocks MHz", "owner pid", "job", "journaled"):
        table.add_column(column)
    for g in _objects(reply["gpus"]):
        sm_clocks_mhz = g["sm_clocks_mhz"]
        clocks = "{}-{}".format(*sm_clocks_mhz) if isinstance(sm_clocks_mhz, list) and sm_clocks_mhz else "-"
        hidden = "(another user)" if g.get("held") and g["owner_pid"] is None else "-"  # details: admins only
        table.add_row(str(g["index"]), str(g["uuid"]), str(g["requested_power_limit_w"] or "-"), clocks,
                      str(g["owner_pid"] or hidden), str(g["owner_job"] or hidden), str(g["journaled"]))
    console = Console()
    console.print(table)
    node_policy = reply.get("node_policy")
    node = node_policy if isinstance(node_policy, dict) else {}
    cap = reply.get("cap_w")
    console.print(f"node cap: {f'{cap:g} W' if cap is not None else 'none'}"
                  + (f" (signal stale, age {node.get('age_s')} s)" if node.get("stale") else ""))


def _objects(value: object) -> list[JSONObject]:
    """The JSON objects in a reply's list (the daemon sends nothing else there)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _restore_only(gpus: list[GPU], state_dir: Path) -> None:
    from greentrain.actuators.controller import KnobController
    from greentrain.errors import ActuationError, GreentrainError

    failed = 0
    for gpu in gpus:
        controller = KnobController(gpu, state_dir)
        try:
            restored = controller.acquire()
            click.echo(f"GPU {gpu.index} {gpu.uuid}: restored {restored} setting(s)")
        except GreentrainError as e:
            failed += 1
            click.echo(f"GPU {gpu.index} {gpu.uuid}: {e}", err=True)
        finally:
            controller.release()
    if failed:
        raise ActuationError(f"{failed} GPU(s) could not be restored; see above")


@click.command("daemon")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False),
              help=f"TOML config (default {DEFAULT_CONFIG} if it exists).")
@click.option("--socket", type=click.Path(path_type=Path), help="Unix socket path (overrides daemon.socket).")
@click.option("--group", help="Group whose members may connect (overrides daemon.group).")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), help="Journal/lock directory.")
@click.option("--check", is_flag=True, help="Validate the config, print it, and exit.")
@click.option("--status", "show_status", is_flag=True, help="Ask the running daemon what it holds, print, exit.")
@click.option("--restore-only", is_flag=True, help="Restore settings journaled by dead processes, then exit.")
@click.option("--fake-gpus", hidden=True, help="MODEL:COUNT file-backed fake GPUs (demos/tests).")
@click.option("-v", "--verbose", is_flag=True, help="Log every request outcome.")
def daemon(config_path: Path | None, socket: Path | None, group: str | None, state_dir: Path | None,
           check: bool, show_status: bool, restore_only: bool, fake_gpus: str | None, verbose: bool) -> None:
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
    if show_status:
        _print_status(config.socket)
        return
    from greentrain.actuators.advisory import refuse_write_if_advisory

    refuse_write_if_advisory("greentrain daemon --restore-only" if restore_only else "greentrain daemon")
    if restore_only:
        _restore_only(_gpus(fake_gpus, config.state_dir), config.state_dir)
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
