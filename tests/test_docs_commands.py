"""Docs are tests: every command README.md and docs/*.md tell people to type runs as written from a fresh
copy of the repository's tracked files (``git ls-files``), not from this working tree.

Each doc file's commands run in order in a copy of their own (a later command may read what an earlier one
wrote); files run side by side in a small pool, each command under a hard timeout. What a command's line
says about it (``tests/gt_docs.py``; README.md, "The documented commands are tested"):
- ``[needs network]``, ``[needs GPU]``, ``[needs root]``, ``[needs cluster]``: not run here;
- ``[runs until stopped]``: a server; it passes when it still runs after ``SERVER_CHECK_S`` and the metrics
  URL it printed answers;
- ``[exits N]``: the command shows an error on purpose; it passes with exit status N and no traceback.

The few commands that take minutes by design (``greentrain demo``: a day of trace in three minutes;
``greentrain train``: a training run) run with a faster replay or fewer steps (``QUICKER``), unless
GREENTRAIN_DOCS_FULL=1.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gt_docs import DocCommand, doc_commands

ROOT = Path(__file__).resolve().parents[1]
COMMAND_TIMEOUT_S = 300.0
SERVER_CHECK_S = 8.0
WORKERS = 3
QUICKER: dict[str, list[str]] = {
    "greentrain demo": ["--speedup", "4000", "--steps", "4", "--no-report"],
    "greentrain train": ["--steps", "2"],
    "python -m greentrain.demo": ["--until", "2022-01-25"],
}
"""Words appended (click takes the last value of a flag) to commands that take minutes by design."""
_URL = re.compile(r"http://[\w.:\[\]-]+/metrics")
_FIXED_PORT_LOCK = threading.Lock()
"""Commands that bind a fixed port (9464, 9877) take turns."""


def _subcommands() -> frozenset[str]:
    from greentrain.cli import COMMANDS

    return frozenset(COMMANDS)


def _parses(text: str) -> bool:
    """Whether click takes ``text`` (a ``greentrain ...`` line) as a whole command: known subcommands, no
    required option or argument missing, every flag with its value. Nothing is run."""
    import shlex

    import click

    from greentrain.cli import cli

    words = shlex.split(re.sub(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*", "", text))
    shell = next((i for i, w in enumerate(words) if w in (">", ">>", "<", "|", "&&", ";", "2>")), len(words))
    words = words[:shell]  # the shell's redirections and pipes are not the command's arguments
    if words[0] != "greentrain":
        return True  # python -m greentrain.X: its own command line
    command: click.Command = cli
    name, args = "greentrain", words[1:]
    while True:
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                ctx = command.make_context(name, list(args))
        except click.exceptions.Exit:  # --help, --version
            return True
        except click.ClickException:
            return False
        if not isinstance(command, click.Group):
            return True
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        sub = command.get_command(ctx, rest[0]) if rest else None
        if sub is None:
            return False
        command, name, args = sub, rest[0], rest[1:]


def _fresh_copy(into: Path) -> Path:
    """The tracked files of this repository, copied to ``into`` (what a fresh clone holds)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ELECTRICITYMAPS_", "WATTTIME_", "GREENTRAIN_"))}
    env.update(HOME=str(home), XDG_STATE_HOME=str(home / "state"), XDG_CACHE_HOME=str(home / "cache"),
               XDG_CONFIG_HOME=str(home / "config"), OMP_NUM_THREADS="1", COLUMNS="100",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]))
    return env


def _quicker(command: str) -> str:
    if os.environ.get("GREENTRAIN_DOCS_FULL") == "1":
        return command
    for prefix, words in QUICKER.items():
        if command.startswith(prefix + " ") or command == prefix:
            if "--help" in command.split():
                return command
            head, sep, tail = command.partition(" -- ")
            return f"{head} {' '.join(words)}{sep}{tail}"
    return command


def _fixed_port(command: str) -> bool:
    words = command.split()
    port = next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--metrics-port"), None)
    if port is not None:
        return port != "0"
    return command.startswith(("greentrain demo", "greentrain exporter"))  # their default ports


def _run_one(doc: DocCommand, cwd: Path, env: dict[str, str]) -> str | None:
    """None when ``doc`` ran as its docs say; else what went wrong."""
    command = _quicker(doc.command)
    lock = _FIXED_PORT_LOCK if _fixed_port(command) else None
    if lock is not None:
        lock.acquire()
    started = time.monotonic()
    try:
        return _serve(command, cwd, env) if doc.server else _complete(doc, command, cwd, env)
    finally:
        if lock is not None:
            lock.release()
        print(f"{time.monotonic() - started:6.1f} s  {doc}")  # shown by pytest -s: where the time goes


_ERROR_LINE = re.compile(r"terminate called|what\(\)|Error|Exception|abort|Traceback", re.IGNORECASE)
"""A line of a failed command's output worth showing even when it is far above the end."""


def _complete(doc: DocCommand, command: str, cwd: Path, env: dict[str, str]) -> str | None:
    expected = doc.exit_status
    started = time.monotonic()
    try:
        proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired:
        return f"still running after {COMMAND_TIMEOUT_S:.0f} s"
    took = time.monotonic() - started
    if proc.returncode != expected or "Traceback (most recent call last)" in proc.stderr:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        # A torchrun rank's own error sits above the launcher's summary: its error lines first, then the tail.
        cause = [line for line in lines[:-12] if _ERROR_LINE.search(line)][-12:]
        tail = "\n    ".join(cause + (["..."] if cause else []) + lines[-12:])
        return f"exit status {proc.returncode} (expected {expected}) after {took:.0f} s:\n    {tail}"
    return None


def _serve(command: str, cwd: Path, env: dict[str, str]) -> str | None:
    """A server passes when it still runs after SERVER_CHECK_S and the metrics URL it printed answers."""
    import httpx

    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline, url = time.monotonic() + SERVER_CHECK_S, None
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.2)
            out.seek(0)
            text = out.read()
            if proc.poll() is not None:
                return f"a server that stopped by itself (status {proc.returncode}):\n    {text.strip()[-600:]}"
            found = _URL.search(text)
            if found is None:
                return f"serving, but printed no metrics URL:\n    {text.strip()[-600:]}"
            url = found.group(0)
            if httpx.get(url, timeout=10.0).status_code != 200:
                return f"{url} did not answer 200"
            return None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def _run_file(commands: list[DocCommand], workdir: Path) -> list[str]:
    copy = _fresh_copy(workdir / "clone")
    env = _environment(workdir / "home")
    failures = []
    for doc in commands:
        why = _run_one(doc, copy, env)
        if why is not None:
            failures.append(f"{doc}\n  {why}")
    return failures


def test_the_extractor_reads_blocks_spans_continuations_and_markers(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "Try `greentrain carbon now --zone GB` or `greentrain monitor -- CMD`.\n\n```bash\n"
        "$ greentrain simulate --trace t.csv \\\n    --work-hours 8   # a comment [needs network]\n"
        "greentrain: error: output, not a command\ngreentrain exporter   # [runs until stopped]\n```\n")
    (tmp_path / "docs" / "a.md").write_text("```\nOMP_NUM_THREADS=1 python -m greentrain.demo --zone GB\n```\n")
    found = doc_commands(tmp_path, frozenset({"carbon", "monitor", "simulate", "exporter"}))
    assert [(c.file, c.line, c.command) for c in found] == [
        ("README.md", 1, "greentrain carbon now --zone GB"),
        ("README.md", 4, "greentrain simulate --trace t.csv --work-hours 8"),
        ("README.md", 7, "greentrain exporter"),
        ("docs/a.md", 2, "OMP_NUM_THREADS=1 python -m greentrain.demo --zone GB"),
    ]
    assert found[1].skipped and found[2].server and not found[0].skipped


@pytest.mark.timeout(900)
def test_every_documented_command_runs_from_a_fresh_copy(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to copy")
    commands = [c for c in doc_commands(ROOT, _subcommands(), _parses) if not c.skipped]
    assert len(commands) > 30, "the extractor found too few commands: is it broken?"
    by_file: dict[str, list[DocCommand]] = {}
    for command in commands:
        chain = by_file.setdefault(command.file, [])
        if all(c.command != command.command for c in chain):  # said twice in a file: run once
            chain.append(command)
    # the longest files first, so the pool does not end waiting on one
    order = sorted(by_file, key=lambda f: -sum(c.command.startswith(tuple(QUICKER)) for c in by_file[f]))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = pool.map(lambda i_f: _run_file(by_file[i_f[1]], tmp_path / f"doc{i_f[0]}"), enumerate(order))
        failures = [failure for result in results for failure in result]
    assert not failures, f"{len(failures)} of {len(commands)} documented commands fail:\n" + "\n".join(failures)
