"""Library code never imports the CLI: deadline parsing lives in greentrain.clock, exit codes in
greentrain.exitcodes, each once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "greentrain"


@pytest.mark.timeout(120)
def test_session_engine_and_integrations_load_without_the_cli() -> None:
    code = ("import sys, greentrain.session, greentrain.engine, greentrain.integrations.driver, "
            "greentrain.job.resolve, greentrain.job.supervisor\n"
            "print(sorted(m for m in sys.modules if m.startswith('greentrain.cli') or m == 'click'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=100).stdout
    assert out.strip() == "[]"


def _defined(pattern: str) -> list[str]:
    hits = []
    for path in PACKAGE.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith(pattern):
                hits.append(f"{path.relative_to(PACKAGE)}: {line}")
    return hits


def test_deadline_parsing_and_the_resume_code_are_defined_once() -> None:
    assert sorted(h.split(":")[0] for h in _defined("def parse_deadline(")) == ["cli/common.py", "clock.py"]
    assert "_parse_deadline(value" in (PACKAGE / "cli" / "common.py").read_text()  # the CLI's is a wrapper
    assert [h.split(":")[0] for h in _defined("RESUME_EXIT_CODE = ")] == ["exitcodes.py"]
    assert not [h for h in _defined("PAUSED_EXIT_CODE = ") if "RESUME_EXIT_CODE" not in h]


def test_parse_deadline_names_the_parameter() -> None:
    from datetime import UTC, datetime, timedelta

    from greentrain.clock import parse_deadline
    from greentrain.errors import ConfigError

    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_deadline("+2", now) == now + timedelta(hours=2)
    assert parse_deadline("2026-01-02T00:00Z", now) == datetime(2026, 1, 2, tzinfo=UTC)
    for bad, reason in (("+x", "is not '+H'"), ("+0", "> 0"), ("+inf", "> 0"), ("soon", "ISO-8601"),
                        ("2026-01-02T00:00", "no timezone")):
        with pytest.raises(ConfigError, match=r"^deadline: .*" + reason.replace("+", r"\+")):
            parse_deadline(bad, now, param="deadline")


# Developer tools with a command line of their own (``python -m ...``); nothing in the library imports them.
_OWN_COMMAND_LINE = {"demo/scenario.py", "exporters/dashboards/preview.py"}


def test_no_library_module_imports_the_cli_even_inside_a_function() -> None:
    import ast

    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "cli" or rel.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            offenders += [f"{rel}:{node.lineno} {n}" for n in names if n.startswith("greentrain.cli")
                          or (n == "click" and str(rel) not in _OWN_COMMAND_LINE)]
    assert offenders == []
