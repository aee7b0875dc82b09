"""Prometheus exporters: the collector, the pull endpoint, Pushgateway push, per-node rank aggregation.

Metric names live in ``greentrain.exporters.names``. Typical use::

    with MetricsServer(job="llm-7b", monitor=monitor, signals=chain, job_stats=stats, port=9464):
        train()
"""

from greentrain.exporters.collector import GreentrainCollector
from greentrain.exporters.push import PushgatewayConfig
from greentrain.exporters.server import MetricsServer

__all__ = ["GreentrainCollector", "MetricsServer", "PushgatewayConfig"]
