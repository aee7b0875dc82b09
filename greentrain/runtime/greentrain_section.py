"""What the runtime reads of the ``[greentrain]`` section, as a type.

The section's class is built at import time from the ``JobOptions`` fields
that ``greentrain train`` takes (``greentrain.runtime.sections``), so a type
checker cannot see its fields. ``GreentrainSection`` declares the ones the
runtime reads by name, with their ``JobOptions`` types (``policy`` may be None
here: plain training).
"""

from __future__ import annotations

from dataclasses import Field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from greentrain.job.options import PolicySpec, ProviderSpec, Relaunch

__all__ = ["GreentrainSection"]


class GreentrainSection(Protocol):
    """An instance of ``greentrain.runtime.sections.GreentrainConfig`` (a dataclass)."""

    __dataclass_fields__: ClassVar[dict[str, Field[object]]]
    job: str
    quiet: bool
    policy: PolicySpec | None
    provider: ProviderSpec | None
    zone: str | None
    relaunch: Relaunch
    scaling_profile: str | Path | None
    scaling_profile_steps: int
