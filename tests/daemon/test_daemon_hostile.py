"""The daemon under hostile clients: malformed lines, 256 simultaneous connects, floods, idle sockets,
a job reaching for a GPU it was not given, and `status` hiding other users' jobs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from greentrain.actuators import ActuatorSet
from greentrain.daemon.client import DaemonClient, DaemonUnavailableError
from greentrain.daemon.config import DaemonConfig
from greentrain.daemon.server import DaemonServer
from greentrain.daemon.visibility import GPUIdentity, cgroup_gpu_minors, cuda_visible, visible_gpus
from greentrain.errors import ConfigError, PrivilegeError
from greentrain.policies.base import Decision
from greentrain.testing import FileBackedGPU
from tests.daemon.gt_hostile_lines import HOSTILE_LINES, VALID, mutations
from tests.daemon.gt_daemon import NOBODY, NOBODY_GROUP, fork_child, make_gpus, needs_root, read_line, serve, wait_for

pytestmark = pytest.mark.timeout(120)

def test_malformed_requests_get_error_replies_and_no_thread_dies(tmp_path: Path, sockdir: Path, caplog) -> None:
    server, gpus = serve(tmp_path, sockdir)
    lines = HOSTILE_LINES + mutations(400)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.connect(str(server.config.socket))
            raw.settimeout(10)
            reader = raw.makefile("rb")
            refused = 0
            for line in lines:
                raw.sendall(line + b"\n")
                reply = json.loads(reader.readline())
                refused += reply["ok"] is False
                assert reply["ok"] is False or line in [json.dumps(v).encode() for v in VALID], (line[:80], reply)
            raw.sendall(b'{"op":"status"}\n')
            assert json.loads(reader.readline())["ok"] is True  # the same connection still works
        assert refused >= len(HOSTILE_LINES)
        assert server.serving
        assert "request handler failed" not in caplog.text and "internal error" not in caplog.text
        assert "forged line" not in caplog.text  # the newline job name never reached a log
        assert all(g.is_default() for g in gpus)
    finally:
        server.shutdown()


def test_256_simultaneous_connects_are_all_served(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    barrier = threading.Barrier(256)
    results: list[str] = []

    def one(i: int) -> None:
        barrier.wait()
        try:
            with DaemonClient(server.config.socket, job=f"job-{i}") as client:
                results.append("ok" if client.status()["ok"] else "refused")
        except Exception as e:  # noqa: BLE001 - counted, reported below
            results.append(f"{type(e).__name__}: {e}")

    try:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(256)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert results.count("ok") == 256, [r for r in results if r != "ok"][:5]
    finally:
        server.shutdown()


def test_connection_flood_is_capped_and_costs_no_threads(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir, max_connections=64, max_connections_per_uid=32)
    threads_before = threading.active_count()
    flood: list[socket.socket] = []
    try:
        for _ in range(600):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(server.config.socket))
            flood.append(s)
        assert wait_for(lambda: server.loop.served + server.loop.refused["per_uid"] == 600)
        assert server.loop.open_connections == 32 and server.loop.refused["per_uid"] == 568
        assert threading.active_count() == threads_before  # one loop thread serves them all
        # A job arriving now is told to retry later; within its budget it gives up cleanly, not for good.
        with pytest.raises(DaemonUnavailableError, match="retry later"):
            DaemonClient(server.config.socket, connect_budget_s=0.3).status()
        for s in flood:
            s.close()
        assert wait_for(lambda: server.loop.open_connections == 0)
        assert DaemonClient(server.config.socket).status()["ok"]
    finally:
        for s in flood:
            s.close()
        server.shutdown()


def test_idle_connections_are_closed_unless_they_hold_a_setting(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir, idle_timeout_s=1.0)
    try:
        idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        idle.connect(str(server.config.socket))
        holder = DaemonClient(server.config.socket, job="holder")
        holder.set_power_limit_w(gpus[0].uuid, 200)
        quiet = DaemonClient(server.config.socket, job="quiet")
        quiet.status()
        assert wait_for(lambda: server.loop.refused["idle"] >= 2, timeout_s=10)
        idle.settimeout(5)
        assert idle.recv(10) == b""  # the daemon hung up on the silent raw socket
        assert gpus[0].power_limit_w() == 200  # the job holding a setting kept its connection
        assert quiet.status()["ok"] and quiet.reconnects == 1  # reopened transparently
        holder.close()
        assert wait_for(gpus[0].is_default)
        idle.close()
        quiet.close()
    finally:
        server.shutdown()


def test_client_waits_for_a_restarting_daemon(tmp_path: Path, sockdir: Path) -> None:
    gpus = make_gpus(tmp_path)
    config = DaemonConfig(socket=sockdir / "d.sock", state_dir=tmp_path / "state")
    server = DaemonServer(gpus, config)
    starter = threading.Timer(0.3, server.start)
    starter.start()
    try:
        assert DaemonClient(config.socket, connect_budget_s=10).status()["ok"]  # refused / absent at first
    finally:
        starter.join()
        server.shutdown()


def test_transient_daemon_failure_does_not_end_the_daemon_route(tmp_path: Path, sockdir: Path) -> None:
    gpus = make_gpus(tmp_path)
    config = DaemonConfig(socket=sockdir / "d.sock", state_dir=tmp_path / "state")
    mine = [FileBackedGPU(tmp_path / "gpu0.json", "a40", index=0, privileged=False)]
    with ActuatorSet(mine, state_dir=tmp_path / "job", daemon_socket=config.socket, install_hooks=False) as acts:
        assert acts.apply(Decision(power_limit_w=200.0)) == []  # no daemon yet: refused this time only
        server = DaemonServer(gpus, config)
        server.start()
        try:
            assert acts.apply(Decision(power_limit_w=210.0)) == ["power_limit"]
            assert gpus[0].power_limit_w() == 210
        finally:
            acts.restore_all()
            server.shutdown()


_CLIENT = """
import sys
from greentrain.daemon.client import DaemonClient
from greentrain.errors import PrivilegeError
client = DaemonClient(sys.argv[1], job="visible-test")
for uuid in sys.argv[2:]:
    try:
        client.set_power_limit_w(uuid, 200)
        print("ok", uuid)
    except PrivilegeError as e:
        print("refused", uuid, e)
client.close()
"""


def _run_client(socket_path: Path, uuids: list[str], cuda_visible_devices: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    if cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
    out = subprocess.run([sys.executable, "-c", _CLIENT, str(socket_path), *uuids], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


def test_a_job_can_only_change_the_gpus_its_process_sees(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir)
    try:
        lines = _run_client(server.config.socket, [gpus[1].uuid, gpus[0].uuid], "0")
        assert lines[0].startswith(f"refused {gpus[1].uuid}") and "CUDA_VISIBLE_DEVICES='0'" in lines[0], lines
        assert lines[1] == f"ok {gpus[0].uuid}"
        assert gpus[1].set_calls == []
        by_uuid = _run_client(server.config.socket, [gpus[1].uuid], gpus[1].uuid[:12])
        assert by_uuid == [f"ok {gpus[1].uuid}"]
        assert _run_client(server.config.socket, [gpus[0].uuid], "")[0].startswith("refused")
    finally:
        server.shutdown()


def test_allow_list_in_the_daemon_config(tmp_path: Path, sockdir: Path) -> None:
    server, gpus = serve(tmp_path, sockdir, gpu_access={str(os.getuid()): ("1",)})
    try:
        with DaemonClient(server.config.socket) as client:
            with pytest.raises(PrivilegeError, match=r"\[gpu_access\] allows uid"):
                client.set_power_limit_w(gpus[0].uuid, 200)
            assert client.set_power_limit_w(gpus[1].uuid, 200)["ok"]
    finally:
        server.shutdown()


def test_visibility_rules_from_proc_and_cgroup(tmp_path: Path) -> None:
    gpus = [GPUIdentity("GPU-aaaa-1", 0), GPUIdentity("GPU-bbbb-2", 1), GPUIdentity("GPU-bbbc-3", 2)]
    assert cuda_visible(None, gpus) is None
    assert cuda_visible("2,0", gpus) == {"GPU-bbbc-3", "GPU-aaaa-1"}
    assert cuda_visible("1,7,0", gpus) == {"GPU-bbbb-2"}  # CUDA stops at the first unknown entry
    assert cuda_visible("GPU-bbb", gpus) == set()  # ambiguous prefix
    assert cuda_visible("MIG-1234", gpus) == set() and cuda_visible("-1", gpus) == set()
    proc, root = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "environ").write_bytes(b"HOME=/root\0CUDA_VISIBLE_DEVICES=0,1\0")
    (proc / "42" / "cgroup").write_text("12:devices:/slurm/job_7\n0::/\n")
    (root / "devices" / "slurm" / "job_7").mkdir(parents=True)
    (root / "devices" / "slurm" / "job_7" / "devices.list").write_text("c 195:1 rw\nc 195:255 rw\nc 1:3 rwm\n")
    assert cgroup_gpu_minors(42, proc, root) == {1, 255}
    allowed, reason = visible_gpus(42, 1000, gpus, {}, proc=proc, cgroup_root=root)
    assert allowed == {"GPU-bbbb-2"} and "device cgroup" in reason
    (root / "devices" / "slurm" / "job_7" / "devices.list").write_text("a *:* rwm\n")
    assert visible_gpus(42, 1000, gpus, {}, proc=proc, cgroup_root=root)[0] == {"GPU-aaaa-1", "GPU-bbbb-2"}
    assert visible_gpus(42, 1000, gpus, {"*": ["2"]}, proc=proc, cgroup_root=root)[0] == set()
    assert visible_gpus(43, 1000, gpus, {}, proc=proc, cgroup_root=root)[0] == set()  # process gone


def test_config_limits_keys_are_validated() -> None:
    from greentrain.daemon.config import parse_config

    config = parse_config({"daemon": {"max_connections": 10, "idle_timeout_s": 30, "admin_uids": [0, 1000]},
                           "gpu_access": {"alice": ["0", "GPU-1"]}})
    assert (config.max_connections, config.idle_timeout_s, config.admin_uids) == (10, 30.0, (0, 1000))
    assert config.gpu_access == {"alice": ("0", "GPU-1")}
    for bad in ({"daemon": {"max_connections": 0}}, {"daemon": {"idle_timeout_s": "1"}},
                {"daemon": {"admin_uids": "root"}}, {"gpu_access": {"alice": "0"}}):
        with pytest.raises(ConfigError):
            parse_config(bad)


def _status_as_nobody(sock_path: Path):
    def job(write_fd: int) -> None:
        os.setgroups([NOBODY])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        reply = DaemonClient(sock_path, job="nobody").status()
        os.write(write_fd, (json.dumps(reply["gpus"]) + "\n").encode())
    return job


@needs_root
@pytest.mark.parametrize("admin", [False, True])
def test_status_shows_other_users_jobs_to_admins_only(tmp_path: Path, sockdir: Path, admin: bool) -> None:
    server, gpus = serve(tmp_path, sockdir, group=NOBODY_GROUP, admin_uids=(NOBODY,) if admin else ())
    try:
        with DaemonClient(server.config.socket, job="secret-project") as owner:
            owner.set_power_limit_w(gpus[0].uuid, 200)
            mine = {g["uuid"]: g for g in owner.status()["gpus"]}
            assert mine[gpus[0].uuid]["owner_pid"] == os.getpid()  # one's own job is always shown
            pid, fd = fork_child(_status_as_nobody(server.config.socket))
            seen = {g["uuid"]: g for g in json.loads(read_line(fd))}
            os.waitpid(pid, 0)
        row = seen[gpus[0].uuid]
        assert row["held"] is True
        if admin:
            assert (row["owner_pid"], row["owner_job"]) == (os.getpid(), "secret-project")
        else:
            assert row["owner_pid"] is None and row["owner_job"] is None
    finally:
        server.shutdown()
