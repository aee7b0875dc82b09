"""On a real NVIDIA GPU (skipped elsewhere): the runtime trains in bf16 and reports MFU."""

from __future__ import annotations

import pytest

from greentrain.runtime.trainer import Trainer

from .harness import tiny_config


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_bf16_on_cuda_trains_and_reports_mfu_when_peak_known() -> None:
    trainer = Trainer(tiny_config(parallel={"dp_shard": 1}, train={"device": "cuda", "dtype": "bf16", "steps": 5}))
    history = trainer.fit()
    assert trainer.device.type == "cuda"
    assert history[-1].loss < history[0].loss
    assert all(m.precision == "bf16" and m.tokens_per_s > 0 for m in history)
    if any(name in trainer.device_name for name in ("H100", "H200", "A100", "L40S", "A40")):
        assert all(m.mfu is not None and 0 < m.mfu < 1 for m in history)
