"""The daemon over a real Unix socket: limits, ownership, auth fences, restore on client death."""

from __future__ import annotations

import grp
import os
import shutil
import signal
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from greentrain.actuators import ActuatorSet, Journal
from greentrain.testing import FileBackedGPU
from greentrain.actuators.lock import DeviceBusyError
from greentrain.daemon.auth import PeerCredentials, authorize
from greentrain.daemon.client import DaemonClient, DaemonUnavailableError
from greentrain.daemon.config import DaemonConfig, GPULimits
from greentrain.daemon.server import DaemonServer
from greentrain.errors import ConfigError, DeviceError, PrivilegeError
from greentrain.policies.base import Decision
from tests.daemon.gt_daemon import NOBODY, NOBODY_GROUP, fork_child, make_gpus, needs_root, read_line, serve, wait_for

pytestmark = pytest.mark.timeout(30)

def test_set_status_reset_and_journal(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    try:
        with DaemonClient(server.config.socket, job="train-a") as client:
            assert client.set_power_limit_w(gpus[0].uuid, 200)["power_limit_w"] == 200
            client.lock_sm_clocks_mhz(gpus[1].uuid, 900, 1200)
            assert gpus[0].power_limit_w() == 200 and gpus[1].locked_sm_clocks_mhz() == (900, 1200)
            assert Journal(tmp_path / "state", gpus[0].uuid).entries()["power_limit_w"].previous == 300.0
            status = {g["uuid"]: g for g in client.status()["gpus"]}
            assert status[gpus[0].uuid]["owner_pid"] == os.getpid()
            assert status[gpus[0].uuid]["owner_job"] == "train-a"
            assert client.reset(gpus[0].uuid)["reset"] == 1
            assert gpus[0].is_default() and not gpus[1].is_default()
    finally:
        server.shutdown()
    assert all(g.is_default() for g in gpus)
    assert not server.config.socket.exists()


def test_limits_unknown_gpu_and_disabled_clocks(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(
        tmp_path, sockdir,
        limits=GPULimits(min_power_limit_w=150, max_power_limit_w=250),
        gpu_limits={"1": GPULimits(allow_clock_lock=False)},
    )
    try:
        with DaemonClient(server.config.socket) as client:
            with pytest.raises(ConfigError, match=r"outside the allowed \[150, 250\] W"):
                client.set_power_limit_w(gpus[0].uuid, 280)
            with pytest.raises(ConfigError, match="outside the allowed"):
                client.set_power_limit_w(gpus[0].uuid, 120)
            with pytest.raises(DeviceError, match="no GPU 'GPU-nope'"):
                client.set_power_limit_w("GPU-nope", 200)
            with pytest.raises(PrivilegeError, match="clock locking is disabled"):
                client.lock_sm_clocks_mhz(gpus[1].uuid, 900, 1200)
            with pytest.raises(ConfigError, match="not supported"):
                client.lock_sm_clocks_mhz(gpus[0].uuid, 100, 5000)
            assert all(g.is_default() for g in gpus) and gpus[0].set_calls == []
            client.set_power_limit_w(gpus[0].uuid, 250)  # still usable after refusals
    finally:
        server.shutdown()


def test_malformed_lines_get_error_replies_and_connection_survives(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(5)
            raw.connect(str(server.config.socket))
            reader = raw.makefile("rb")
            for line in (b"garbage\n", b'{"op":"set_power_limit","uuid":1}\n', b'{"op":"reset","knob":"fan"}\n'):
                raw.sendall(line)
                reply = reader.readline()
                assert b'"ok":false' in reply and (b"bad_request" in reply), reply
            raw.sendall(b'{"op":"status"}\n')
            assert b'"ok":true' in reader.readline()
            raw.sendall(b"x" * 10_000 + b"\n")  # oversized: refused, then the daemon hangs up
            assert b"longer than" in reader.readline()
            try:  # then it hangs up (a reset, as our unread bytes are discarded)
                assert reader.readline() == b""
            except ConnectionResetError:
                pass
    finally:
        server.shutdown()
    assert all(g.is_default() for g in gpus)


def test_two_clients_cannot_share_a_gpu(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    try:
        with DaemonClient(server.config.socket, job="first") as a, DaemonClient(server.config.socket, job="second") as b:
            a.set_power_limit_w(gpus[0].uuid, 200)
            with pytest.raises(DeviceBusyError, match=r"held by pid \d+ \(first\)"):
                b.set_power_limit_w(gpus[0].uuid, 150)
            b.set_power_limit_w(gpus[1].uuid, 150)  # a different GPU is fine
            a.close()  # first job ends: GPU 0 restored and free again
            assert wait_for(gpus[0].is_default)
            b.set_power_limit_w(gpus[0].uuid, 175)
            assert gpus[0].power_limit_w() == 175
    finally:
        server.shutdown()


def test_client_killed_by_sigkill_gets_its_settings_reset(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    try:
        def job(write_fd: int) -> None:
            client = DaemonClient(server.config.socket, job="doomed")
            client.set_power_limit_w(gpus[0].uuid, 125)
            client.lock_sm_clocks_mhz(gpus[0].uuid, 600, 900)
            os.write(write_fd, b"ready\n")
            time.sleep(60)

        pid, read_fd = fork_child(job)
        assert read_line(read_fd) == "ready"
        assert gpus[0].power_limit_w() == 125
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_fd)
        assert wait_for(gpus[0].is_default), f"daemon did not reset after client death: {gpus[0].settings()}"
        assert wait_for(lambda: Journal(tmp_path / "state", gpus[0].uuid).entries() == {})
    finally:
        server.shutdown()


def _as_nobody(sock_path: Path, groups: list[int]):
    def job(write_fd: int) -> None:
        os.setgroups(groups)
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        try:
            reply = DaemonClient(sock_path, job="nobody").status()
            os.write(write_fd, f"ok {len(reply['gpus'])}\n".encode())
        except PrivilegeError as e:
            os.write(write_fd, f"refused {e}\n".encode())
    return job


@needs_root
def test_socket_permission_fence_refuses_users_outside_the_group(tmp_path: Path, sockdir: Path) -> None:
    server, _ = serve(tmp_path, sockdir)  # no group: socket is root-only (0600)
    try:
        mode = stat.S_IMODE(server.config.socket.stat().st_mode)
        assert mode == 0o600
        pid, fd = fork_child(_as_nobody(server.config.socket, []))
        line = read_line(fd)
        os.waitpid(pid, 0)
        assert line.startswith("refused") and "permission denied" in line and "usermod -aG" in line, line
    finally:
        server.shutdown()


@needs_root
def test_group_members_are_let_in(tmp_path: Path, sockdir: Path) -> None:
    server, _ = serve(tmp_path, sockdir, group=NOBODY_GROUP)
    try:
        st = server.config.socket.stat()
        assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == NOBODY
        pid, fd = fork_child(_as_nobody(server.config.socket, [NOBODY]))
        line = read_line(fd)
        os.waitpid(pid, 0)
        assert line == "ok 2", line
    finally:
        server.shutdown()


@needs_root
def test_peer_credentials_fence_when_socket_mode_is_too_open(tmp_path: Path, sockdir: Path) -> None:
    server, _ = serve(tmp_path, sockdir)
    try:
        server.config.socket.chmod(0o666)  # a mistake by an admin: SO_PEERCRED still refuses
        pid, fd = fork_child(_as_nobody(server.config.socket, []))
        line = read_line(fd)
        os.waitpid(pid, 0)
        assert line.startswith("refused") and "uid 65534 is not allowed" in line, line
    finally:
        server.shutdown()


def test_authorize_rules() -> None:
    cfg = DaemonConfig(group=NOBODY_GROUP, allowed_uids=(4242,))
    assert authorize(PeerCredentials(1, 0, 0), cfg) is None
    assert authorize(PeerCredentials(1, 4242, 4242), cfg) is None
    assert authorize(PeerCredentials(2**22, 1234, NOBODY), cfg) is None  # primary group matches
    reason = authorize(PeerCredentials(2**22, 1234, 1234), cfg)
    assert reason is not None and f"not in group '{NOBODY_GROUP}'" in reason


def test_second_daemon_on_same_socket_is_refused(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    try:
        with pytest.raises(ConfigError, match="already listening"):
            DaemonServer(gpus, server.config).start()
    finally:
        server.shutdown()


def test_node_cap_applies_to_idle_gpus_and_caps_client_requests(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    try:
        server.set_node_cap(200.0, {"intensity_g_per_kwh": 400})
        assert [g.power_limit_w() for g in gpus] == [200, 200]
        with DaemonClient(server.config.socket) as client:
            reply = client.set_power_limit_w(gpus[0].uuid, 275)
            assert reply["power_limit_w"] == 200 and reply["capped"] is True
            client.set_power_limit_w(gpus[1].uuid, 150)  # lower than the cap: honoured
            server.set_node_cap(None)  # grid clean again: the client's request takes full effect
            assert gpus[0].power_limit_w() == 275 and gpus[1].power_limit_w() == 150
            server.set_node_cap(250.0)
            assert gpus[0].power_limit_w() == 250 and gpus[1].power_limit_w() == 150
        assert wait_for(lambda: gpus[0].power_limit_w() == 250 and gpus[1].power_limit_w() == 250)
        server.set_node_cap(None)
        assert all(g.is_default() for g in gpus)
    finally:
        server.shutdown()


def test_actuator_set_falls_back_to_daemon_without_privilege(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    try:
        # the job's view of the same GPUs, without root
        mine = [FileBackedGPU(tmp_path / f"gpu{i}.json", "a40", index=i, privileged=False) for i in range(2)]
        with ActuatorSet(mine, state_dir=tmp_path / "job-state", daemon_socket=server.config.socket,
                         install_hooks=False) as acts:
            assert acts.apply(Decision(power_limit_w=175.0)) == ["power_limit"]
            assert [g.power_limit_w() for g in gpus] == [175, 175]
            assert acts.refused_total == {}
        assert wait_for(lambda: all(g.is_default() for g in gpus))
    finally:
        server.shutdown()


def test_daemon_refusing_one_value_does_not_end_the_daemon_route(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir, limits=GPULimits(max_power_limit_w=250))
    try:
        mine = [FileBackedGPU(tmp_path / "gpu0.json", "a40", index=0, privileged=False)]
        with ActuatorSet(mine, state_dir=tmp_path / "job", daemon_socket=server.config.socket,
                         install_hooks=False) as acts:
            assert acts.apply(Decision(power_limit_w=280.0)) == []  # above the daemon's limit
            assert acts.refused_total["power_limit"] == 1
            assert acts.apply(Decision(power_limit_w=200.0)) == ["power_limit"]
            assert gpus[0].power_limit_w() == 200
        assert wait_for(gpus[0].is_default)
    finally:
        server.shutdown()


def test_daemon_down_means_refusal_not_crash(tmp_path: Path, sockdir: Path) -> None:
    gpu = FileBackedGPU(tmp_path / "gpu.json", "a40", privileged=False)
    with ActuatorSet([gpu], state_dir=tmp_path, daemon_socket=sockdir / "none.sock", install_hooks=False) as acts:
        assert acts.apply(Decision(power_limit_w=175.0)) == []
        assert acts.refused_total["power_limit"] == 1
    with pytest.raises(DaemonUnavailableError, match="start it with `sudo greentrain daemon`"):
        DaemonClient(sockdir / "none.sock").status()


def test_daemon_killed_then_restarted_restores_from_journal(tmp_path: Path, sockdir: Path) -> None:
    sock = sockdir / "d.sock"

    def crashed_daemon(write_fd: int) -> None:  # a daemon that gets SIGKILLed while a job holds settings
        gpus = make_gpus(tmp_path)
        server = DaemonServer(gpus, DaemonConfig(socket=sock, state_dir=tmp_path / "state"))
        server.start()
        client = DaemonClient(sock)  # kept open: closing it would make the daemon restore
        client.set_power_limit_w(gpus[0].uuid, 125)
        os.write(write_fd, b"ready\n")
        time.sleep(60)

    pid, fd = fork_child(crashed_daemon)
    assert read_line(fd) == "ready"
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    gpus = make_gpus(tmp_path)
    assert gpus[0].power_limit_w() == 125  # left behind by the dead daemon
    server = DaemonServer(gpus, DaemonConfig(socket=sock, state_dir=tmp_path / "state"))
    server.start()  # the stale socket is replaced, the journal restored
    try:
        assert gpus[0].is_default()
        with DaemonClient(sock) as client:
            assert client.status()["ok"]
    finally:
        server.shutdown()


def test_daemon_without_privilege_says_so(tmp_path: Path, sockdir: Path) -> None:
    gpus = make_gpus(tmp_path, privileged=False)
    server = DaemonServer(gpus, DaemonConfig(socket=sockdir / "d.sock", state_dir=tmp_path / "state"))
    server.start()
    try:
        with DaemonClient(server.config.socket) as client:
            with pytest.raises(PrivilegeError, match="the daemon itself lacks the privilege"):
                client.set_power_limit_w(gpus[0].uuid, 200)
        assert Journal(tmp_path / "state", gpus[0].uuid).entries() == {}
    finally:
        server.shutdown()
