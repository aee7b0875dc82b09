"""The docs/benchmarks.md section of ``gpu_acceptance.py``: every row measured, or "not measured" with why."""

from __future__ import annotations

from typing import Any

__all__ = ["render"]

NM = "not measured"


def _pct(value: float | None) -> str:
    return NM if value is None else f"{value:+.2f} %"


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    return NM if value is None else format(value, fmt) + unit


def _section(results: dict[str, Any], name: str) -> dict[str, Any]:
    part = results.get(name)
    return part if isinstance(part, dict) and "error" not in part else {}


def _why(results: dict[str, Any], name: str) -> str:
    if not results.get("measured"):
        return results.get("reason", "")
    part = results.get(name)
    if part is None:
        return "section not run (--sections)"
    return part.get("error", "") if isinstance(part, dict) else ""


def render(results: dict[str, Any]) -> str:
    """Markdown for one run; a section that did not run says so and why."""
    where = (f"{results['device']}, torch {results['torch']}, {results['date']}" if results.get("measured")
             else f"{NM}: {results.get('reason', '')} ({results.get('date', '')}, host {results.get('host', '')})")
    lines = ["### GPU acceptance (issue 16)", "", f"`{results.get('command', '')}`", "",
             f"Where: {where}. NVML writes: {results.get('nvml_guard', '')} over "
             f"{results.get('setters_guarded', 0)} setters, {len(results.get('setter_attempts', []))} attempted.", ""]
    lines += _energy(results) + _calls(results) + _session(results) + _precision(results) + _runtime(results)
    return "\n".join(lines) + "\n"


def _note(results: dict[str, Any], name: str) -> list[str]:
    why = _why(results, name)
    return [f"({NM}: {why})", ""] if why else []


def _energy(results: dict[str, Any]) -> list[str]:
    e = _section(results, "energy")
    return ["#### Monitor energy over a mixed load (measured = NVML counter, integrated = 2 ms-polled instant power)",
            "", "| figure | value |", "|---|---|",
            f"| window | {_num(e.get('window_s'), '.1f', ' s')} |",
            f"| NVML counter (measured) | {_num(e.get('counter_j'), ',.0f', ' J')} |",
            f"| instant power polled every 2 ms, integrated | {_num(e.get('integrated_j'), ',.0f', ' J')} |",
            f"| greentrain Monitor window ({e.get('monitor_source', 'source n/a')}) | "
            f"{_num(e.get('monitor_j'), ',.0f', ' J')} |",
            f"| Monitor vs counter | {_pct(e.get('monitor_vs_counter_pct'))} |",
            f"| Monitor vs integrated instant power | {_pct(e.get('monitor_vs_integrated_pct'))} |",
            f"| counter vs integrated instant power | {_pct(e.get('counter_vs_integrated_pct'))} |", ""
            ] + _note(results, "energy")


def _calls(results: dict[str, Any]) -> list[str]:
    c = _section(results, "calls")
    rows = c.get("rows") or [{"call": name} for name in (
        "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetFieldValues(POWER_INSTANT)", "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetClockInfo(SM)", "greentrain Monitor sampling pass (1 GPU)")]
    out = [f"#### NVML call costs ({c.get('calls', 'N')} calls each; CPU time of the calling thread)", "",
           "| call | CPU µs/call | wall µs/call |", "|---|---|---|"]
    out += [f"| {r['call']} | {_num(r.get('cpu_us'), ',.1f')} | {_num(r.get('wall_us'), ',.1f')} |" for r in rows]
    return out + [""] + _note(results, "calls")


def _session(results: dict[str, Any]) -> list[str]:
    s = _section(results, "session")
    blocks = f"{s['rounds']} × {s['steps']}" if s else NM
    return ["#### Session overhead vs a bare bf16 loop (interleaved blocks; A/A = bare vs bare)", "",
            "| figure | value |", "|---|---|",
            f"| rounds × steps per block | {blocks} |",
            f"| bare loop, ms/step | {_num(s.get('bare_ms_per_step'), '.2f')} |",
            f"| under Session (advisory, monitor 10 Hz, /metrics at 1 Hz), ms/step | "
            f"{_num(s.get('session_ms_per_step'), '.2f')} |",
            f"| step-time ratio Session / bare (median of rounds) | {_num(s.get('ratio_median'), '.4f')} |",
            f"| A/A control ratio | {_num(s.get('aa_ratio_median'), '.4f')} |", ""] + _note(results, "session")


def _precision(results: dict[str, Any]) -> list[str]:
    p = _section(results, "precision")
    rows = p.get("rows") or [{"precision": name} for name in ("fp32", "tf32", "bf16")]
    out = ["#### Energy per step by precision (NVML counter over the block: measured)", "",
           "| precision | J/step | ms/step | mean W |", "|---|---|---|---|"]
    out += [f"| {r['precision']} | {_num(r.get('j_per_step'), '.1f')} | {_num(r.get('ms_per_step'), '.1f')} | "
            f"{_num(r.get('mean_w'), '.0f')} |" for r in rows]
    return out + [""] + _note(results, "precision")


def _pct(value: Any) -> str:
    return NM if value is None else f"{value * 100:.1f} %"


def _runtime(results: dict[str, Any]) -> list[str]:
    r = _section(results, "runtime")
    return ["#### Runtime tokens/s vs a plain compiled loop of the same model (bf16, interleaved rounds)", "",
            "| figure | value |", "|---|---|",
            f"| shape | {r.get('shape', NM)} |",
            f"| greentrain Trainer, tokens/s | {_num(r.get('runtime_tokens_per_s'), ',.0f')} |",
            f"| plain loop, torch.compile(model), fused AdamW, same batches and clipping, tokens/s | "
            f"{_num(r.get('compiled_tokens_per_s'), ',.0f')} |",
            f"| ratio Trainer / plain compiled | {_num(r.get('ratio'), '.3f')} |",
            f"| MFU, Trainer / plain (dense bf16 peak) | {_pct(r.get('mfu'))} / {_pct(r.get('plain_mfu'))} |",
            ""] + _note(results, "runtime")
