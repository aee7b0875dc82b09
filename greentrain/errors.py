"""One exception tree for everything greentrain raises on purpose.

Each class also subclasses the matching built-in so callers that catch
``ValueError`` or ``PermissionError`` keep working. Messages name the input
(file, key, argument, device) and the fix.
"""

from __future__ import annotations

__all__ = [
    "GreentrainError",
    "ConfigError",
    "InvalidConfig",
    "DeviceError",
    "DeviceNotFoundError",
    "NotSupportedError",
    "PrivilegeError",
    "DeviceLostError",
    "SignalError",
    "AuthError",
    "RateLimitedError",
    "ActuationError",
    "DaemonUnavailableError",
    "DeadlineError",
    "MissingExtraError",
    "Interrupted",
]


class GreentrainError(Exception):
    """Root of every error greentrain raises deliberately."""


class ConfigError(GreentrainError, ValueError):
    """Bad configuration or argument; the message names the key and the fix."""


class InvalidConfig(ConfigError):
    """One or more bad values of one input; ``problems`` holds ``(key, reason)`` for each (a settings class's
    checks raise it to report every problem at once; ``greentrain.tables`` collects them)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("\n".join(f"{key}: {why}" for key, why in problems))
        self.problems = problems


class DeadlineError(ConfigError):
    """The deadline is in the past or too short for the remaining work."""


class MissingExtraError(GreentrainError, ImportError):
    """A feature's optional dependency is not installed; the message names the ``pip install``."""


class DeviceError(GreentrainError, RuntimeError):
    """A device (GPU, CPU energy domain) could not do what was asked."""


class DeviceNotFoundError(DeviceError, LookupError):
    """No device matches the given index or UUID."""


class NotSupportedError(DeviceError):
    """The device or driver does not offer this reading or control."""


class PrivilegeError(DeviceError, PermissionError):
    """The control exists but this process lacks the privilege to use it."""


class DeviceLostError(DeviceError):
    """The device stopped answering (e.g. NVML GPU_IS_LOST)."""


class SignalError(GreentrainError, RuntimeError):
    """A carbon-intensity provider failed; callers fall back, training goes on."""


class AuthError(SignalError):
    """The provider rejected our credentials (never included in the message)."""


class RateLimitedError(SignalError):
    """The provider asked us to slow down (HTTP 429)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ActuationError(GreentrainError, RuntimeError):
    """A hardware or job action could not be applied or restored."""


class DaemonUnavailableError(ActuationError):
    """No ``greentrain daemon`` answers on the socket (may be transient: the next request tries again)."""


class Interrupted(SystemExit, KeyboardInterrupt):
    """Ctrl-C ended a wait: ends the program with status ``code`` (130) and no traceback; the driver (``Session``,
    the CLI) says the one line.

    A ``KeyboardInterrupt`` too, so a training loop's own ``except KeyboardInterrupt`` (to save, say) still
    catches it; re-raised or uncaught, Python exits quietly with ``code`` as for ``SystemExit``."""

    def __init__(self, code: int = 130) -> None:
        super().__init__(code)
