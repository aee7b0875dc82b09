"""Without a policy, ``--metrics-port`` still exports step/token counters while training (rank 0)."""

from __future__ import annotations

import httpx
import pytest

from greentrain.runtime.greentrain_hooks import run_training
from tests.ranks import free_port

from .harness import tiny_config


@pytest.mark.timeout(60)
def test_prometheus_counts_steps_and_tokens_during_training() -> None:
    port = free_port()
    cfg = tiny_config(parallel={"dp_shard": 1}, metrics={"port": port}, greentrain={"job": "rt-test"})
    scraped: list[str] = []

    def scrape(m) -> None:
        if m.step == 2:
            scraped.append(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)

    run_training(cfg, on_step=scrape)
    [text] = scraped
    tokens_per_step = cfg.train.global_batch * cfg.train.seq_len
    assert 'greentrain_training_steps_total{job="rt-test"} 2.0' in text
    assert f'greentrain_training_tokens_total{{job="rt-test"}} {float(2 * tokens_per_step)}' in text
    with pytest.raises(httpx.ConnectError):  # stopped with the run
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
