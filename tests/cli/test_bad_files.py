"""Every file a user hands the CLI, broken every way: one line per problem, exit 2, file and key named.

Each case goes through a real subcommand (``policy validate``, ``train --config``,
``simulate``, ``carbon``, ``run``, ``demo``) in-process, and fails before any
work starts (no training step, no child process, no output folder content).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from greentrain.cli import main
from greentrain.fields import hints, type_problem
from greentrain.policies.settings import PolicySettings
from greentrain.runtime import config as runtime_config

pytestmark = pytest.mark.timeout(60)

SHIPPED_TRACE = Path(runtime_config.__file__).parents[1] / "data" / "carbon" / "GB_2022_hourly.csv"
GOOD_POLICY = '[policy]\nkind = "threshold"\n'


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run ``greentrain ARGS``; (exit code, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
        raise SystemExit(0)
    err = capsys.readouterr().err
    code = info.value.code
    return (0 if code is None else code), err


def assert_one_clean_error(code: int, err: str, *needles: str, lines: int = 1) -> None:
    problems = [line for line in err.splitlines() if line.startswith("greentrain: error:")]
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(problems) == lines, err
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"


# ---- the same broken files through every command that reads one --------------------------------------

def _policy_commands(path: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "policy validate": ["policy", "validate", str(path)],
        "simulate": ["simulate", "--trace", str(SHIPPED_TRACE), "--start", "2022-03-01T00:00Z",
                     "--work-hours", "2", "--deadline-hours", "12", "--policy", str(path)],
        "run": ["run", "--policy", str(path), "--", "true"],
        "demo": ["demo", "--out", str(tmp_path / "demo-out"), "--policy", str(path), "--no-progress"],
    }


BROKEN_TEXT: dict[str, tuple[bytes, str]] = {
    # name: (file content, what the line must say)
    "latin-1": ('description = "Politique à éviter"\n'.encode("latin-1"), "save it as UTF-8"),
    "utf-16": ('[policy]\nkind = "threshold"\n'.encode("utf-16"), "UTF-16"),
    "utf-16 no BOM": ('[policy]\nkind = "threshold"\n'.encode("utf-16-le"), "UTF-16"),
    "binary": (bytes(range(256)) * 8, "not a UTF-8 text file"),
    "deep nesting": (b"x = " + b"[" * 50_000 + b"]" * 50_000 + b"\n", "nested more than"),
    "malformed": (b"[policy\nkind = 1\n", "invalid TOML"),
    "oversized": (b"# " + b"x" * (1 << 21) + b"\n", "byte limit"),
}


@pytest.mark.parametrize("command", ["policy validate", "simulate", "run", "demo"])
@pytest.mark.parametrize("fault", sorted(BROKEN_TEXT))
def test_broken_policy_file(command: str, fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    content, needle = BROKEN_TEXT[fault]
    path = tmp_path / "policy.toml"
    path.write_bytes(content)
    code, err = cli(capsys, *_policy_commands(path, tmp_path)[command])
    assert_one_clean_error(code, err, str(path), needle)
    assert not (tmp_path / "demo-out" / "demo.json").exists(), "nothing started"


@pytest.mark.parametrize("fault", sorted(BROKEN_TEXT))
def test_broken_runtime_config(fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    content, needle = BROKEN_TEXT[fault]
    path = tmp_path / "job.toml"
    path.write_bytes(content)
    code, err = cli(capsys, "train", "--config", str(path))
    assert_one_clean_error(code, err, str(path), needle)
    assert "step " not in capsys.readouterr().out


def _special(kind: str, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)  # no writer: opening it for reading would block forever
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        return Path("/dev/null")
    return path


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
@pytest.mark.parametrize("command", ["policy validate", "simulate", "run", "demo", "train", "carbon", "trace"])
def test_not_a_regular_file_is_refused_without_opening(kind: str, command: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    if kind == "device" and not Path("/dev/null").exists():
        pytest.skip("no /dev/null on this system")
    ext = "csv" if command in ("carbon", "trace") else "toml"
    path = _special(kind, tmp_path, f"x.{ext}")
    argv = {
        "train": ["train", "--config", str(path)],
        "carbon": ["carbon", "now", "--zone", "GB", "--provider", f"csv:{path}"],
        "trace": ["simulate", "--trace", str(path), "--start", "2022-03-01T00:00Z", "--work-hours", "2",
                  "--deadline-hours", "12"],
    }.get(command) or _policy_commands(path, tmp_path)[command]
    code, err = cli(capsys, *argv)
    assert code == 2 and "Traceback" not in err, err
    assert str(path) in err or "does not exist" in err or "is a directory" in err, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err


@pytest.mark.parametrize("command", ["carbon", "trace"])
@pytest.mark.parametrize(("content", "needle"), [
    (b"", "missing column"),
    ("Datetime (UTC),Zone Id\n2022-01-01 00:00:00,GB\n".encode("utf-16"), "UTF-16"),
    ("Datetime (UTC),Carbon Intensity gCO₂eq/kWh (direct)\n2022-01-01 00:00:00,nan\n".encode(), "not a finite"),
    ("Datetime (UTC),Carbon Intensity gCO₂eq/kWh (direct)\n2022-01-01 00:00:00,inf\n".encode(), "not a finite"),
    ("Datetime (UTC),Carbon Intensity gCO\xe2eq/kWh (direct)\n".encode("latin-1"), "save it as UTF-8"),
])
def test_broken_trace(command: str, content: bytes, needle: str, tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(content)
    argv = (["carbon", "now", "--zone", "GB", "--provider", f"csv:{path}"] if command == "carbon" else
            ["simulate", "--trace", str(path), "--start", "2022-01-01T00:00Z", "--work-hours", "1",
             "--deadline-hours", "2"])
    code, err = cli(capsys, *argv)
    assert_one_clean_error(code, err, str(path), needle)


# ---- values: out of range, NaN/inf, wrong types -----------------------------------------------------

@pytest.mark.parametrize(("toml", "key"), [
    ("[model]\nvocab_size = 100000000000\n", "model.vocab_size"),
    ("[model]\nmax_seq_len = 1000000000000\n", "model.max_seq_len"),
    ("[model]\nffn_dim_multiplier = -1.0\n", "model.ffn_dim_multiplier"),
    ("[model]\nrope_theta = 0.0\n", "model.rope_theta"),
    ("[model]\nrope_theta = nan\n", "model.rope_theta"),
    ("[model]\nnorm_eps = 0.0\n", "model.norm_eps"),
    ("[model]\nn_kv_heads = 0\n", "model.n_kv_heads"),
    ("[model]\ndim = 65536\nn_layers = 100000\n", "model.dim"),
    ("[train]\nlr = inf\n", "train.lr"),
    ("[train]\nlr = -inf\n", "train.lr"),
    ("[train]\nmax_grad_norm = inf\n", "train.max_grad_norm"),
    ("[train]\nweight_decay = nan\n", "train.weight_decay"),
    ("[train]\nsteps = 1000000000000000\n", "train.steps"),
    ("[train]\nseed = -1\n", "train.seed"),
    ("[parallel]\nmesh = \"auto\"\ndevice_memory_gb = -4.0\n", "parallel.device_memory_gb"),
    ("[parallel]\ntp = 2\n", "parallel.tp"),
    ("[data]\nsource = \"/nonexistent/corpus\"\n", "data.source"),
    ("[checkpoint]\ndir = \"{regular_file}/ckpt\"\n", "checkpoint.dir"),
    ("[greentrain]\npolicy = \"no-such-policy\"\n", "greentrain.policy"),
    ("[greentrain]\nprovider = \"carbonfairy\"\n", "greentrain.provider"),
    ("[greentrain]\ndeadline = \"tomorrow\"\n", "greentrain.deadline"),
    ("[greentrain]\nzone = \"GBR\"\n", "greentrain.zone"),
])
def test_bad_value_names_file_and_key(toml: str, key: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    regular = tmp_path / "a-file"
    regular.write_text("x")
    path = tmp_path / "job.toml"
    path.write_text(toml.replace("{regular_file}", str(regular)), encoding="utf-8")
    code, err = cli(capsys, "train", "--config", str(path))
    assert_one_clean_error(code, err, f"{path}: {key}:")
    assert "step " not in capsys.readouterr().out


def _wrong_value(hint: object) -> str:
    """A TOML value of the wrong type for a field annotated ``hint``."""
    for value, toml in ((5, "5"), ("many", '"many"'), (True, "true")):
        if type_problem(hint, value) is not None:
            return toml
    raise AssertionError(f"every value fits {hint}")


def _all_keys() -> list[tuple[str, str, object]]:
    return [(section, name, hint) for section, cls in runtime_config.SECTIONS.items()
            for name, hint in hints(cls).items()]


@pytest.mark.parametrize(("section", "key", "hint"), _all_keys(), ids=lambda v: str(v))
def test_every_config_key_with_a_wrong_type(section: str, key: str, hint: object, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.toml"
    path.write_text(f"[{section}]\n{key} = {_wrong_value(hint)}\n", encoding="utf-8")
    code, err = cli(capsys, "train", "--config", str(path))
    assert_one_clean_error(code, err, f"{path}: {section}.{key}: expected")


@pytest.mark.parametrize("key", [f.name for f in dataclasses.fields(PolicySettings)] + ["description"])
def test_every_policy_setting_with_a_wrong_type(key: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.toml"
    table = "policy" if key == "description" else "settings"
    path.write_text(f"{GOOD_POLICY}[{table}]\n{key} = 5\n".replace(f"[{table}]\n", f"\n[{table}]\n")
                    if table == "settings" else f"{GOOD_POLICY}{key} = 5\n", encoding="utf-8")
    if key in ("resume_overhead_s", "waiting_power_w", "max_emissions_g", "max_energy_j"):  # a number is right: a string
        path.write_text(f'{GOOD_POLICY}[settings]\n{key} = "long"\n', encoding="utf-8")
    code, err = cli(capsys, "policy", "validate", str(path))
    assert_one_clean_error(code, err, str(path), f"{table}.{key}")


def test_several_problems_in_one_file_are_all_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.toml"
    path.write_text("[model]\nn_kv_heads = 0\nnorm_eps = -1.0\n[train]\nlr = inf\nstepz = 3\n[trian]\n",
                    encoding="utf-8")
    code, err = cli(capsys, "train", "--config", str(path))
    assert_one_clean_error(code, err, "model.n_kv_heads", "model.norm_eps", "train.lr", "train.stepz",
                           "did you mean 'steps'", "unknown section [trian]", lines=5)
    assert all(str(path) in line for line in err.splitlines() if line.strip())


def test_policy_file_with_several_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('[policy]\nkind = "threshold"\ndescription = 5\n[settings]\nresume_overhead_s = nan\n'
                    'pause_mode = 3\n[extra]\n', encoding="utf-8")
    code, err = cli(capsys, "policy", "validate", str(path))
    assert_one_clean_error(code, err, "extra", "settings.resume_overhead_s", "settings.pause_mode",
                           "policy.description", lines=4)


# ---- a value from a flag is blamed on the flag ---------------------------------------------------------

@pytest.mark.parametrize(("args", "needle"), [
    (["--steps", "-1"], "--steps: must be >= 1, got -1"),
    (["--lr", "inf"], "--lr: must be a finite number"),
    (["--tp", "2"], "--tp: "),
    (["--set", "model.n_kv_heads=0"], "--set model.n_kv_heads: must be >= 1"),
    (["--zone", "GBR", "--policy", "run-now"], "--zone: 'GBR' is not an Electricity Maps zone id; did you mean 'GB'"),
    (["--checkpoint-dir", "{regular_file}/ckpt"], "--checkpoint-dir: cannot create folder"),
])
def test_flag_values_are_blamed_on_the_flag(args: list[str], needle: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    regular = tmp_path / "a-file"
    regular.write_text("x")
    code, err = cli(capsys, "train", *[a.replace("{regular_file}", str(regular)) for a in args])
    assert_one_clean_error(code, err, needle)
    assert "--config" not in err and "preset" not in err


# ---- zones ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "needle"), [
    (["run", "--zone", "GBR", "--", "true"], "did you mean 'GB' (United Kingdom)"),
    (["run", "--zone", "Atlantis", "--", "true"], "unknown zone 'Atlantis'"),
    (["run", "--zone", "Grmany", "--", "true"], "did you mean 'DE' (Germany)"),
    (["carbon", "now", "--zone", "GBR"], "did you mean 'GB'"),
    (["carbon", "forecast", "--zone", "US-CAL-CISX"], "did you mean 'US-CAL-CISO'"),
])
def test_unknown_zone_is_refused_with_a_suggestion(argv: list[str], needle: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, err = cli(capsys, *argv)
    assert_one_clean_error(code, err, "--zone: ", needle)


@pytest.mark.parametrize(("deadline", "needle"), [
    ("2020-01-01T00:00Z", "is before the simulated start"),
    ("+3", "is only 3 h after the simulated start"),
])
def test_demo_deadline_is_blamed_on_the_flag(deadline: str, needle: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, err = cli(capsys, "demo", "--out", str(tmp_path / "out"), "--deadline", deadline, "--no-progress")
    assert_one_clean_error(code, err, "--deadline: ", needle)
    assert "deadline_h" not in err and not (tmp_path / "out" / "demo.json").exists()


@pytest.mark.parametrize("fault", sorted(BROKEN_TEXT) + ["fifo", "directory"])
def test_broken_daemon_config(fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if fault in ("fifo", "directory"):
        path = _special(fault, tmp_path, "daemon.toml")
        needle = "is a directory" if fault == "directory" else "give a regular file"  # click's Path check first
    else:
        path = tmp_path / "daemon.toml"
        content, needle = BROKEN_TEXT[fault]
        path.write_bytes(content)
    code, err = cli(capsys, "daemon", "--config", str(path))
    assert_one_clean_error(code, err, str(path), needle)


def test_daemon_config_reports_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "daemon.toml"
    path.write_text('[daemon]\nsocket_mode = "0777"\nallowed_uids = "x"\nmax_connections = -1\n\n'
                    '[limits]\nbogus = 1\n', encoding="utf-8")
    code, err = cli(capsys, "daemon", "--config", str(path))
    assert_one_clean_error(code, err, "daemon.socket_mode", "daemon.allowed_uids", "daemon.max_connections",
                           "limits.bogus", lines=4)
    assert err.count(str(path)) == 4
