"""Framework and scheduler integrations; each module imports its framework only when used.

* ``hf``: ``GreenTrainCallback`` for the Hugging Face ``Trainer`` (+ ``train`` helper).
* ``lightning``: ``GreenTrainCallback`` for Lightning (+ ``fit``, ``ResumableLoader``).
* ``accelerate``: ``GreenAccelerate`` for hand-written Accelerate loops.
* ``slurm`` / ``slurm_plan`` / ``placement`` / ``forecasts``: ``greentrain submit`` (start time and place).
* ``kubernetes``: ``JobController`` behind ``greentrain k8s-controller``.
* ``driver``: the engine wiring the framework callbacks share.
"""

__all__: list[str] = []
