"""Checks of a training job against the machine and the outside world, before step 1.

``config_from_dict`` checks each value on its own; this checks what needs the
file system or other modules: the mesh against the number of processes, the
data folder, that checkpoint and metrics folders are writable (a probe file is
created and removed), and that the ``[greentrain]`` policy, provider and zone
resolve (the deadline's form is checked with the section, by ``JobOptions``).
Every problem is reported, one line each, naming the key through ``where``
(``config.toml: checkpoint.dir`` or the flag it came from).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.runtime.config import JobConfig

__all__ = ["preflight", "outside_problems"]

_MESH_KEYS = ("pp", "dp_replicate", "dp_shard", "cp", "ep", "tp")


def preflight(cfg: JobConfig, where: Callable[[str], str], *, world_size: int, probe_folders: bool = True) -> None:
    """Raise one ConfigError listing every problem; ``where(key)`` names the source of ``section.key``."""
    lines: list[str] = []
    check = _checker(lines, where)
    if cfg.train.device == "cuda":
        check("train.device", _check_cuda)
    if cfg.parallel.mesh == "manual":
        check(_mesh_blame(cfg), lambda: _check_mesh(cfg, world_size, where))
    check("data.source", lambda: _check_data(cfg.data.source))
    if probe_folders:
        from greentrain.userfile import check_writable_dir

        folder, jsonl = cfg.checkpoint.dir, cfg.metrics.jsonl
        if folder:
            check("checkpoint.dir", lambda: _probe(check_writable_dir, folder))
        if jsonl:
            check("metrics.jsonl", lambda: _probe(check_writable_dir, str(Path(jsonl).parent)))
    if cfg.metrics.port is not None:
        check("metrics.addr", lambda: _check_addr(cfg.metrics.addr, cfg.metrics.allow_public))
    lines += outside_problems(cfg.greentrain.policy, cfg.greentrain.provider, cfg.greentrain.zone, where)
    if lines:
        raise ConfigError("\n".join(lines))


def outside_problems(policy: object, provider: object, zone: object, where: Callable[[str], str]) -> list[str]:
    """One line per ``[greentrain]`` policy, provider or zone that does not resolve (values of another type are
    the section's own problem). Also asked while the rest of a file has problems, so one pass says them all."""
    lines: list[str] = []
    check = _checker(lines, where)
    provider_text = provider if isinstance(provider, str) else None
    if isinstance(policy, str) and policy:
        check("greentrain.policy", lambda: _check_policy(policy))
    if provider_text:
        check("greentrain.provider", lambda: _check_provider(provider_text))
    if isinstance(zone, str) and zone:
        check("greentrain.zone", lambda: _check_zone(zone, provider_text))
    return lines


def _checker(lines: list[str], where: Callable[[str], str]) -> Callable[[str, Callable[[], None]], None]:
    """``check(key, run)``: calls ``run()``; each line of a ConfigError it raises goes to ``lines``, named
    ``where(key)``."""

    def check(key: str, run: Callable[[], None]) -> None:
        try:
            run()
        except ConfigError as e:
            lines.extend(f"{where(key)}: {line}" for line in str(e).splitlines())

    return check


def _check_addr(addr: str, allow_public: bool) -> None:
    from greentrain.exporters.server import is_loopback

    if not is_loopback(addr) and not allow_public:
        raise ConfigError(f"{addr or '(all interfaces)'} is not a loopback address, so anyone on the network could "
                          "read these metrics; allow it with --metrics-allow-public or [metrics] allow_public = true")


def _check_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("'cuda' but no CUDA device is visible; use 'cpu' or 'auto'")


def _mesh_blame(cfg: JobConfig) -> str:
    """The mesh key to name: the first one set above 1 (tp = 2 on one process names tp)."""
    for key in ("tp", "cp", "ep", "pp", "dp_replicate", "dp_shard"):
        if getattr(cfg.parallel, key) > 1:
            return f"parallel.{key}"
    return "parallel.dp_shard"


def _check_mesh(cfg: JobConfig, world_size: int, where: Callable[[str], str]) -> None:
    p = cfg.parallel
    sizes = {k: getattr(p, k) for k in _MESH_KEYS}
    fixed = p.dp_replicate * p.tp * p.pp * p.cp * p.ep * (p.dp_shard if p.dp_shard != -1 else 1)
    fits = world_size % fixed == 0 if p.dp_shard == -1 else world_size == fixed
    if not fits:
        layout = " * ".join(f"{k}={v}" for k, v in sizes.items() if v != -1)
        # "--tp", "--set parallel.tp" or "job.toml: parallel.tp": the flag, or the key in the file
        named = ", ".join(where(f"parallel.{k}").rsplit(": ", 1)[-1] for k, v in sizes.items() if v > 1)
        given = f" (from {named})" if named else ""
        raise ConfigError(f"{layout} = {fixed} processes{given}, but this job has {world_size}; "
                          f"launch with --nproc {fixed} (or torchrun) or change the sizes")


def _check_data(source: str) -> None:
    if source == "stdlib":
        return
    path = Path(source)
    if not path.is_dir():
        raise ConfigError(f"{source!r} is not a folder; use 'stdlib' or a folder of text files")


def _probe(check_writable_dir: Callable[..., Path], folder: str) -> None:
    try:
        check_writable_dir(folder, what="")
    except ConfigError as e:  # "<what>: reason": the caller adds the key
        raise ConfigError(str(e).removeprefix(": ")) from None


def _check_policy(spec: str) -> None:
    from greentrain.policies import load_policy

    load_policy(spec)


def _check_provider(spec: str) -> None:
    from greentrain.signals.providers.registry import provider_names

    name, _, argument = spec.partition(":")
    name = name.strip().lower()
    if name not in provider_names():
        raise ConfigError(f"unknown provider {name!r}; valid: {', '.join(provider_names())}, csv:PATH")
    if name == "csv":
        if not argument:
            raise ConfigError("'csv' needs a path: csv:PATH (an Electricity Maps CSV export)")
        from greentrain.signals.trace import load_trace

        load_trace(argument)


def _check_zone(zone: str, provider: str | None) -> None:
    from greentrain.signals.providers.zones import check_zone

    reason = check_zone(zone, provider)
    if reason is not None:
        raise ConfigError(reason)
