"""The one reader for user files: regular files only, a size cap, UTF-8 only (with advice), bounded nesting."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from greentrain.errors import ConfigError
from greentrain.userfile import (
    MAX_TOML_DEPTH,
    Problems,
    check_writable_dir,
    decode_text,
    load_json,
    load_toml,
    parse_toml,
    read_text,
)

pytestmark = pytest.mark.timeout(30)


def test_utf8_with_and_without_bom(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    for data in ('x = "é"\n'.encode(), b"\xef\xbb\xbf" + 'x = "é"\n'.encode()):
        path.write_bytes(data)
        assert load_toml(path) == {"x": "é"}


@pytest.mark.parametrize(("data", "needle"), [
    ('x = "à"\n'.encode("latin-1"), ":1:6: byte 0xe0 is not UTF-8 (the file looks like Latin-1/Windows-1252); "
                                     "save it as UTF-8"),
    ('x = "a"\n'.encode("utf-16"), "UTF-16 (byte-order mark)"),
    ('x = "a"\n'.encode("utf-16-be"), "UTF-16 without a byte-order mark"),
    (b"\x00\x01\x02\x03binary\xff" * 20, "binary data"),
    (bytes([0x80, 0x81, 0x00]) + b"\x8d\x8f" * 50, "binary data"),
])
def test_other_encodings_say_what_to_save_in(data: bytes, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        decode_text(data, "f.toml")
    assert str(info.value).startswith("f.toml") and needle in str(info.value)
    assert "\n" not in str(info.value)


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "x.toml"
    os.mkfifo(fifo)
    done = threading.Event()
    errors: list[str] = []

    def read() -> None:
        try:
            read_text(fifo, what="policy file")
        except ConfigError as e:
            errors.append(str(e))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10), "reading a FIFO with no writer must not block"
    assert errors == [f"{fifo}: policy file is a named pipe (FIFO); give a regular file"]


def test_socket_directory_and_device_are_refused(tmp_path: Path) -> None:
    sock_path = tmp_path / "s.toml"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        for path, kind in ((sock_path, "a socket"), (tmp_path, "a directory"), (Path("/dev/null"), "a character")):
            with pytest.raises(ConfigError, match=f"is {kind}"):
                read_text(path)
    finally:
        server.close()


def test_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * 2048)
    assert read_text(path, max_bytes=2048)
    with pytest.raises(ConfigError, match="2,049 bytes, over the 2,048-byte limit"):
        path.write_bytes(b"#" * 2049)
        read_text(path, max_bytes=2048)


def test_nesting_is_bounded_before_parsing() -> None:
    ok = "x = " + "[" * MAX_TOML_DEPTH + "]" * MAX_TOML_DEPTH
    assert parse_toml(ok, "f.toml")
    for deep in ("x = " + "[" * 100_000 + "]" * 100_000, "x = " + "{a = " * 5000 + "1" + "}" * 5000):
        with pytest.raises(ConfigError, match=r"f.toml:1:\d+: arrays or tables nested more than 32 deep"):
            parse_toml(deep, "f.toml")


def test_brackets_inside_strings_and_comments_do_not_count() -> None:
    text = ('a = "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["  # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n'
            "b = '''\n[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['''\n"
            'c = """\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["""\n[[t]]\nd = [[1], [2]]\n')
    data = parse_toml(text, "f.toml")
    assert data["t"] == [{"d": [[1], [2]]}] and data["a"].startswith("[[")


def test_toml_syntax_error_has_line_and_column() -> None:
    with pytest.raises(ConfigError, match=r"^f.toml:2:5: invalid TOML: "):
        parse_toml("a = 1\nb = \n", "f.toml")


def test_json_errors_name_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{\n  "a": oops}\n')
    with pytest.raises(ConfigError, match=r"s.json:2:8: state is not valid JSON"):
        load_json(path, what="state")


def test_problems_collects_one_line_each() -> None:
    problems = Problems("p.toml")
    problems.add("policy.kind", "required")
    problems.add(None, "empty file")
    with pytest.raises(ConfigError) as info:
        problems.raise_if_any()
    assert str(info.value).splitlines() == ["p.toml: policy.kind: required", "p.toml: empty file"]


def test_writable_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    folder = check_writable_dir(tmp_path / "new" / "out", what="--out")
    assert folder.is_dir() and list(folder.iterdir()) == []
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"^--out: .*file is not a folder$"):
        check_writable_dir(blocker, what="--out")
    with pytest.raises(ConfigError, match=r"^--out: cannot create folder .*Not a directory"):
        check_writable_dir(blocker / "sub", what="--out")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", '"x"', "true"])
def test_daemon_config_refuses_non_finite_and_non_positive_limits(value: str, tmp_path: Path) -> None:
    from greentrain.daemon.config import load_config

    path = tmp_path / "daemon.toml"
    path.write_text(f"[limits]\nmax_power_limit_w = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"daemon.toml: limits.max_power_limit_w: (must be a|expected float)"):
        load_config(path)
    path.write_bytes(b"[limits]\nmax_power_limit_w = 250 # \xe9\n")
    with pytest.raises(ConfigError, match=r"daemon.toml:2:.*save it as UTF-8"):
        load_config(path)


def test_secret_files_never_quote_their_bytes(tmp_path: Path) -> None:
    from greentrain.signals.transport.credentials import read_secret

    path = tmp_path / "token"
    path.write_bytes(b"s3cr\xe9t-token\n")
    with pytest.raises(ConfigError) as info:
        read_secret("GT_TEST_TOKEN", path)
    assert str(info.value) == f"{path}: not UTF-8 text; save it as UTF-8"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="secret file is a named pipe"):
        read_secret("GT_TEST_TOKEN", fifo)
    path.write_text("ok-token\n")
    assert read_secret("GT_TEST_TOKEN", path) == "ok-token"
