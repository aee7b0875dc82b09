"""greentrain: energy- and carbon-aware training for PyTorch.

Measures the energy a training job uses, reads the grid's carbon intensity,
and lets a policy decide — at step boundaries — when the job runs and how hard
the GPU works, always meeting the user's deadline.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
