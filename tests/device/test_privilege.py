"""The read-only privilege judgement: effective uid, CAP_SYS_ADMIN in CapEff, no write."""

from __future__ import annotations

from pathlib import Path

import pytest

from greentrain.device import privilege


def status_file(tmp_path: Path, cap_eff: str) -> Path:
    path = tmp_path / "status"
    path.write_text(f"Name:\tpython\nUid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapEff:\t{cap_eff}\n")
    return path


def test_cap_eff_is_parsed_as_hex(tmp_path: Path) -> None:
    assert privilege.effective_capabilities(status_file(tmp_path, "0000000000200000")) == 1 << 21
    assert privilege.effective_capabilities(tmp_path / "missing") is None
    assert privilege.effective_capabilities(status_file(tmp_path, "zz")) is None


@pytest.mark.parametrize(("euid", "cap_eff", "permitted", "basis"), [
    (0, "0000000000000000", True, "euid 0 (root)"),
    (1000, "0000000000200000", True, "CAP_SYS_ADMIN in the effective capability set"),
    (1000, "00000000001fffff", False, "euid 1000, no CAP_SYS_ADMIN"),  # every capability below bit 21
])
def test_local_privilege(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, euid: int, cap_eff: str,
                         permitted: bool, basis: str) -> None:
    monkeypatch.setattr(privilege.os, "geteuid", lambda: euid)
    judged = privilege.local_privilege(status_file(tmp_path, cap_eff))
    assert (judged.permitted, judged.basis, judged.verified) == (permitted, basis, False)


def test_no_daemon_socket_means_no_daemon(tmp_path: Path) -> None:
    assert privilege.daemon_gpus(tmp_path / "absent.sock") is None
    not_a_socket = tmp_path / "plain-file"
    not_a_socket.write_text("")
    assert privilege.daemon_gpus(not_a_socket, timeout_s=0.5) is None
