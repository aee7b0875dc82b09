"""``greentrain k8s-controller``: suspend/resume labelled Kubernetes Jobs by carbon policy."""

from __future__ import annotations

import logging
import os
import signal
import threading

import click

from greentrain.cli.common import parse_deadline
from greentrain.clock import SystemClock
from greentrain.errors import ConfigError

__all__ = ["k8s_controller"]


def _custom_api():
    from kubernetes import client

    return client.CustomObjectsApi()


def _batch_api(kubeconfig: str | None):
    try:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException
    except ImportError:
        raise ConfigError("k8s-controller needs the kubernetes client: pip install 'greentrain[k8s]'") from None
    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
        else:
            config.load_kube_config(config_file=kubeconfig)
    except (ConfigException, OSError) as e:
        raise ConfigError(f"--kubeconfig: cannot load Kubernetes credentials ({e})") from None
    return client.BatchV1Api()


def _forecasts(provider: str | None, traces: tuple[str, ...], replay_start: str | None, clock: SystemClock):
    from greentrain.integrations.forecasts import ProviderForecasts, TraceForecasts

    if traces:
        if replay_start is None:
            raise click.BadParameter("needed with --replay-trace", param_hint="--replay-start")
        now = clock.now()
        return TraceForecasts(traces, replay_start=parse_deadline(replay_start, now, "--replay-start"), now=now)
    return ProviderForecasts(provider or "electricitymaps", clock=clock)


@click.command()
@click.option("--policy", "policy_spec", default="forecast-optimal", show_default=True,
              help="Policy preset name or TOML file.")
@click.option("--namespace", help="Watch one namespace (default: all namespaces).")
@click.option("--interval-s", type=click.FloatRange(min=1.0), default=300.0, show_default=True,
              help="Seconds between reconcile passes.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Kubeconfig file (default: in-cluster or ~/.kube/config).")
@click.option("--provider", help="Carbon signal provider spec (default: electricitymaps).")
@click.option("--replay-trace", "traces", multiple=True, type=click.Path(dir_okay=False),
              help="Use a recorded Electricity Maps CSV as the forecast (repeat per zone).")
@click.option("--replay-start", help="Trace time that stands for now (ISO-8601 with zone).")
@click.option("--pytorchjobs", is_flag=True,
              help="Also scale labelled Kubeflow PyTorchJobs' worker count (carbon scaling; use --policy "
                   "carbon-aware; see integrations/kubernetes/pytorchjob.yaml).")
@click.option("--once", is_flag=True, help="One reconcile pass, print what was done, exit.")
def k8s_controller(policy_spec: str, namespace: str | None, interval_s: float, kubeconfig: str | None,
                   provider: str | None, traces: tuple[str, ...], replay_start: str | None, pytorchjobs: bool,
                   once: bool) -> None:
    """Resume Jobs labelled greentrain.io/managed=true when the policy says run; suspend them otherwise.

    \b
    Each Job carries annotations greentrain.io/zone, greentrain.io/deadline and
    greentrain.io/work-hours; see integrations/kubernetes/job.yaml.
    """
    from greentrain.integrations.k8s_reconcile import Reconciler, run_controllers
    from greentrain.integrations.kubernetes import JobController
    from greentrain.policies import load_policy

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    clock = SystemClock()
    policy = load_policy(policy_spec)
    forecasts = _forecasts(provider, traces, replay_start, clock)
    controllers: list[Reconciler] = [JobController(_batch_api(kubeconfig), policy, forecasts, clock=clock,
                                                   namespace=namespace)]
    if pytorchjobs:
        from greentrain.integrations.pytorchjob import PyTorchJobController

        controllers.append(PyTorchJobController(_custom_api(), policy, forecasts, clock=clock, namespace=namespace))
    if once:
        for outcome in (o for c in controllers for o in c.reconcile_once()):
            state = {None: "left alone", True: "suspended", False: "running"}[outcome.suspend]
            click.echo(f"{outcome.namespace}/{outcome.name}: {state}{' (changed)' if outcome.changed else ''}"
                       f" - {outcome.reason}")
        return
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    run_controllers(controllers, clock, interval_s, stop)
