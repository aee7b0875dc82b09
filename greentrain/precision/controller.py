"""Pick the training precision by *measured* energy per step, guarded by a loss check.

Trial phase: each allowed precision runs ``warmup_steps`` (ignored: kernels,
caches and the grad scaler settle) and then ``trial_steps`` measured steps.
The cheapest precision whose loss stayed healthy is then kept (settled
phase). Throughout, a loss guard compares each window of ``guard_window``
steps with the loss level seen at the previous precision; a non-finite loss
or a rise beyond ``loss_tolerance`` reverts to the previous precision and
bans the offender. Switches happen only at step boundaries, and every
decision is rank 0's, broadcast to all ranks, at step numbers every rank
reaches together.

Usage::

    pc = PrecisionController(("fp32", "bf16", "fp16"), device_type="cpu")
    for batch in loader:
        with pc.autocast():
            loss = model(batch)
        pc.backward_step(loss, optimizer)       # scaler for fp16, plain otherwise
        switched_to = pc.on_step_end(loss, step_energy_j, step_time_s)
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, TypedDict, TypeGuard

if TYPE_CHECKING:
    from torch import Tensor
    from torch.amp import GradScaler
    from torch.optim import Optimizer

from greentrain.errors import ConfigError, NotSupportedError
from greentrain.precision.support import autocast_dtype, unsupported_reason
from greentrain.profiler.collective import Collective, default_collective

__all__ = ["PrecisionConfig", "PrecisionController", "Phase"]

log = logging.getLogger(__name__)


class Phase(StrEnum):
    TRIAL = "trial"
    SETTLED = "settled"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrecisionConfig:
    """Trial lengths and the loss guard."""

    warmup_steps: int = 2
    """Steps after each switch that are not measured."""
    trial_steps: int = 5
    """Measured steps per candidate precision."""
    guard_window: int = 5
    """Steps per loss-guard check (checks happen at multiples of this, on all ranks)."""
    loss_tolerance: float = 0.25
    """Allowed relative rise of the window's mean loss over the reference loss level."""

    def __post_init__(self) -> None:
        for name, value, low in (("warmup_steps", self.warmup_steps, 0), ("trial_steps", self.trial_steps, 1),
                                 ("guard_window", self.guard_window, 1)):
            if value < low:
                raise ConfigError(f"PrecisionConfig.{name}: too small ({value})")
        if not self.loss_tolerance > 0:
            raise ConfigError(f"PrecisionConfig.loss_tolerance: must be > 0, got {self.loss_tolerance}")


class PrecisionController:
    """Chooses among ``allowed`` precisions; ``allowed[0]`` is the reference the job starts with."""

    def __init__(
        self,
        allowed: Sequence[str],
        *,
        device_type: str = "cpu",
        config: PrecisionConfig = PrecisionConfig(),
        collective: Collective | None = None,
    ) -> None:
        if not allowed:
            raise ConfigError("allowed: give at least one precision, e.g. ('fp32', 'bf16')")
        if len(set(allowed)) != len(allowed):
            raise ConfigError(f"allowed: duplicate precision in {list(allowed)}")
        refused = {p: r for p in allowed if (r := unsupported_reason(p, device_type)) is not None}
        if refused:
            details = "; ".join(f"{p}: {r}" for p, r in refused.items())
            raise NotSupportedError(f"precision(s) not available on this {device_type}: {details}")
        self.allowed = tuple(allowed)
        self.device_type = device_type
        self.config = config
        self._collective = collective or default_collective()
        self.current = self.allowed[0]
        self.phase = Phase.TRIAL if len(self.allowed) > 1 else Phase.SETTLED
        self.banned: set[str] = set()
        self.measured: dict[str, float] = {}
        """Mean energy (J) per step of each completed trial; time (s) where no energy was given."""
        self._fallback: str | None = None
        self._reference_loss: float | None = None
        self._steps_here = 0
        self._trial: list[float] = []  # energy (or time) of measured steps of the running trial
        self._window: list[Tensor | float] = []
        """This window's losses as given (device tensors stay on the device until the window's check)."""
        self._pending: str | None = None
        self._scalers: dict[bool, GradScaler] = {}

    # -- what the training step uses ----------------------------------------------------
    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """Context for the forward pass at the current precision."""
        import torch

        if self.current in ("fp32", "tf32"):
            # cuDNN allows TF32 by default: set both flags so "fp32" really is full float32
            tf32 = self.current == "tf32"
            matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
            try:
                yield
            finally:
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
            return
        dtype = autocast_dtype(self.current)
        if dtype is None:
            yield
            return
        with torch.autocast(self.device_type, dtype=dtype):
            yield

    @property
    def scaler(self) -> GradScaler:
        """A ``torch.amp.GradScaler``: active for fp16, a pass-through otherwise (one of each, kept)."""
        import torch

        enabled = self.current == "fp16"
        if enabled not in self._scalers:
            self._scalers[enabled] = torch.amp.GradScaler(self.device_type, enabled=enabled)
        return self._scalers[enabled]

    def backward_step(self, loss: Tensor, optimizer: Optimizer) -> None:
        """``backward`` + ``optimizer.step`` + ``zero_grad`` through the current scaler."""
        scaler = self.scaler
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    # -- decisions ------------------------------------------------------------------------
    def request(self, precision: str) -> bool:
        """A policy asks for ``precision``; it takes effect at the next ``on_step_end``. True if scheduled."""
        if precision not in self.allowed:
            raise ConfigError(f"precision {precision!r} not in allowed {list(self.allowed)}")
        if precision in self.banned:
            raise ConfigError(f"precision {precision!r} was reverted by the loss guard and stays off")
        if precision == self.current:
            return False
        if self.phase is Phase.TRIAL:
            log.info("precision %r requested during the measured trial; the trial decides first", precision)
            return False
        self._pending = precision
        return True

    def on_step_end(self, loss: Tensor | float, step_energy_j: float | None, step_time_s: float) -> str | None:
        """Record one step; returns the precision to use from the next step when it changes, else None."""
        self._steps_here += 1
        self._window.append(_detached(loss))
        if self.phase is Phase.TRIAL and self._steps_here > self.config.warmup_steps:
            self._trial.append(step_energy_j if step_energy_j is not None else step_time_s)
        at_window = self._steps_here % self.config.guard_window == 0
        at_trial_end = self.phase is Phase.TRIAL and len(self._trial) >= self.config.trial_steps
        decision: str | None = None
        if at_window or at_trial_end:  # step counts since the last switch: identical on every rank
            cost = self._reduce_trial() if at_trial_end else None
            outcome = self._collective.broadcast(self._decide(at_window, cost))  # rank 0's view wins
            decision = self._adopt(outcome)
        if decision is None and self._pending is not None:
            decision = self._pending  # from a policy Decision, which the engine already broadcast
        self._pending = None
        if decision is not None and decision != self.current:
            self._switch(decision)
            return decision
        return None

    def _reduce_trial(self) -> float:
        """Whole-job mean cost per step of the finished trial (energies add up over ranks)."""
        mean = sum(self._trial) / len(self._trial)
        self._trial = []
        return self._collective.all_reduce([mean], "sum")[0]

    def _decide(self, at_window: bool, cost: float | None) -> _Verdict:
        """Local verdict: a guard revert beats a trial step; returned as plain data for the broadcast."""
        measured, banned, phase = dict(self.measured), set(self.banned), self.phase
        if cost is not None:
            measured[self.current] = cost
        decision: str | None = None
        if at_window and self._guard_diverged():
            banned.add(self.current)
            phase, decision = Phase.SETTLED, self._fallback
        elif cost is not None:
            remaining = [p for p in self.allowed if p not in measured and p not in banned]
            if remaining:
                decision = remaining[0]
            else:
                healthy = {p: c for p, c in measured.items() if p not in banned}
                phase, decision = Phase.SETTLED, min(healthy, key=lambda p: healthy[p])
                log.info("precision trial: measured cost per step %s; keeping %s", measured, decision)
        return {"decision": decision, "phase": str(phase), "banned": sorted(banned), "measured": measured}

    def _adopt(self, outcome: _Verdict) -> str | None:
        self.measured = dict(outcome["measured"])
        self.banned = set(outcome["banned"])
        self.phase = Phase(outcome["phase"])
        return outcome["decision"]

    def _guard_diverged(self) -> bool:
        """Whether the last window's loss left the healthy range; updates the reference level otherwise."""
        window, self._window = _host_values(self._window), []
        mean = sum(window) / len(window)
        finite = all(math.isfinite(v) for v in window)
        if self._fallback in (None, self.current) or self._reference_loss is None:
            if finite:  # the reference precision sets the level; nothing to revert to
                self._reference_loss = mean if self._reference_loss is None else min(self._reference_loss, mean)
            return False
        limit = self._reference_loss + self.config.loss_tolerance * abs(self._reference_loss)
        if finite and mean <= limit:
            self._reference_loss = min(self._reference_loss, mean)
            return False
        log.warning("loss guard: %s diverged (window mean %.4g > %.4g); reverting to %s",
                    self.current, mean, limit, self._fallback)
        return True

    def _switch(self, precision: str) -> None:
        if self.current not in self.banned:
            self._fallback = self.current  # the last precision known healthy
        self.current = precision
        self._steps_here, self._window, self._trial = 0, [], []


class _Verdict(TypedDict):
    """Rank 0's verdict on a window, as plain data for the broadcast."""

    decision: str | None
    phase: str
    banned: list[str]
    measured: dict[str, float]


def _is_tensor(loss: Tensor | float) -> TypeGuard[Tensor]:
    """Duck-typed, so torch is imported only once a tensor is met."""
    return hasattr(loss, "detach")


def _detached(loss: Tensor | float) -> Tensor | float:
    """The loss without its graph, left where it is: reading it on the host would wait for the device."""
    return loss.detach() if _is_tensor(loss) else float(loss)


def _host_values(window: list[Tensor | float]) -> list[float]:
    """A window's losses as floats, with one device-to-host copy for all of them (one sync per window)."""
    tensors = [v for v in window if _is_tensor(v)]
    if not tensors:
        return [float(v) for v in window]
    import torch

    values = iter(torch.stack([t.float().reshape(()) for t in tensors]).tolist())
    return [next(values) if _is_tensor(v) else float(v) for v in window]
