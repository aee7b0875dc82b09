"""greentrain: energy- and carbon-aware training for PyTorch.

Measures the energy a training job uses, reads the grid's carbon intensity,
and lets a policy decide — at step boundaries — when the job runs and how hard
the GPU works, always meeting the user's deadline.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "Session"]


def __getattr__(name: str) -> object:
    # Lazy so that ``import greentrain`` (and ``greentrain --help``) stays light.
    if name == "Session":
        from greentrain.session import Session

        return Session
    raise AttributeError(f"module 'greentrain' has no attribute {name!r}")
