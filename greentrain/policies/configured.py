"""Base for policies configured by a small frozen dataclass (the ``[policy]`` table of a TOML file)."""

from __future__ import annotations

from typing import Any, ClassVar

from greentrain.policies.base import Policy
from greentrain.policies.settings import PolicySettings

__all__ = ["ConfiguredPolicy"]


class ConfiguredPolicy(Policy):
    """A policy whose parameters live in ``self.config`` (an instance of ``Config``)."""

    Config: ClassVar[type]
    """Frozen dataclass of parameters; validates itself in ``__post_init__``."""

    def __init__(self, config: Any = None, *, settings: PolicySettings | None = None) -> None:
        self.config = self.Config() if config is None else config
        if not isinstance(self.config, self.Config):
            raise TypeError(f"{type(self).__name__}: config must be {self.Config.__name__}")
        if settings is not None:
            self.settings = settings

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"
