"""Every command that serves metrics binds loopback unless told otherwise, and says how."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _monitor(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "greentrain", "monitor", "--duration-s", "0.2", "--metrics-port", "0", *extra],
        capture_output=True, text=True, timeout=60,
    )


@pytest.mark.timeout(90)
def test_public_address_needs_the_explicit_flag() -> None:
    refused = _monitor("--metrics-addr", "0.0.0.0")
    assert refused.returncode == 2
    assert "--metrics-allow-public" in refused.stderr
    assert "Traceback" not in refused.stderr
    allowed = _monitor("--metrics-addr", "0.0.0.0", "--metrics-allow-public")
    assert allowed.returncode == 0, allowed.stderr
    assert "0.0.0.0" in allowed.stderr


@pytest.mark.parametrize("command", ["run", "train", "monitor"])
def test_flag_is_offered(command: str) -> None:
    from click.testing import CliRunner

    from greentrain.cli import cli

    result = CliRunner().invoke(cli, [command, "--help"])
    assert "--metrics-allow-public" in result.output
