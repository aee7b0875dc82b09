"""A real Slurm cluster on 127.0.0.1 for tests: own munge key, ports and state dir.

Starts munged, slurmctld and one slurmd per node in the foreground as children
of the test process and stops each by its pid. ``env`` points the Slurm client
tools at it (``SLURM_CONF``); the fast scheduler intervals make jobs start
within seconds. The default is one node, ``gtnode``, in partitions ``uk`` and
``de``; ``SlurmCluster(root, nodes=16, gpus_per_node=1)`` starts sixteen
slurmd on this host (each its own port, spool and log), with GPUs as a
count-only generic resource, in one partition ``gpu``;
``partitions=("clean", "dirty")`` splits the nodes among partitions of those
names instead, in order (the first gets the remainder), so a fleet test has
partitions on two grid zones with their own GPUs to move jobs between.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.ranks import free_port

__all__ = ["SlurmCluster", "slurm_missing"]

_BINARIES = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")

_CONF = """\
ClusterName=gttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/sock
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
PlugStackConfig={root}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
"""

_ONE_NODE = """\
NodeName=gtnode NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=uk Nodes=gtnode Default=YES MaxTime=INFINITE State=UP
PartitionName=de Nodes=gtnode MaxTime=INFINITE State=UP
"""


def _free_ports(count: int) -> list[int]:
    """Ports below Linux's ephemeral range (32768+), so no outgoing connection takes one meanwhile."""
    for _ in range(50):
        base = random.randrange(20000, 32000 - count)
        ports = list(range(base, base + count))
        try:
            for port in ports:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return ports
    raise RuntimeError(f"no {count} free consecutive ports below 32000")


def slurm_missing() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if os.geteuid() != 0:
        return "Slurm test cluster needs root (SlurmUser=root)"
    missing = [b for b in _BINARIES if not os.access(b, os.X_OK)]
    missing += [b for b in ("sbatch", "scontrol") if shutil.which(b) is None]
    return f"Slurm/munge not installed: {', '.join(missing)}" if missing else None


class SlurmCluster:
    """munged + slurmctld + slurmd under ``root`` (a temp dir)."""

    def __init__(self, root: Path, *, nodes: int = 1, gpus_per_node: int = 0,
                 partitions: tuple[str, ...] = ("gpu",)) -> None:
        self.root = root
        self.nodes = ["gtnode"] if nodes == 1 and not gpus_per_node else [f"gt{i:02d}" for i in range(nodes)]
        self.gpus_per_node = gpus_per_node
        if not partitions or len(partitions) > len(self.nodes):
            raise ValueError(f"partitions {partitions}: one to {len(self.nodes)} (a node each at least)")
        self.partitions = partitions
        self._procs: list[subprocess.Popen] = []
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "TZ": "UTC"}

    def start(self, timeout_s: float = 30.0) -> None:
        for sub in ("munge", "state", "spool", "log"):
            (self.root / sub).mkdir(mode=0o700, exist_ok=True)
        (self.root / "munge").chmod(0o711)  # munged wants the socket dir reachable
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (self.root / "plugstack.conf").write_text("")
        self.conf.write_text(self._conf())
        m = self.root / "munge"
        self._spawn(["/usr/sbin/munged", "-F", "-f", f"--key-file={key}", f"--socket={m}/sock",
                     f"--pid-file={m}/pid", f"--seed-file={m}/seed", f"--log-file={m}/log"], "munged")
        self._wait(lambda: (m / "sock").exists(), timeout_s, "munged socket")
        self._spawn(["/usr/sbin/slurmctld", "-D", "-f", str(self.conf)], "slurmctld")
        for node in self.nodes:
            self._spawn(["/usr/sbin/slurmd", "-D", "-f", str(self.conf), "-N", node],
                        "slurmd" if node == "gtnode" else f"slurmd-{node}")
        self._wait(self.node_idle, timeout_s, f"{len(self.nodes)} node(s) idle")

    def _conf(self) -> str:
        if self.nodes == ["gtnode"]:
            return _CONF.format(host=socket.gethostname(), root=self.root, ctld_port=free_port(),
                                slurmd_port=free_port()) + _ONE_NODE
        ports = _free_ports(len(self.nodes) + 1)
        conf = _CONF.replace("SlurmdPort={slurmd_port}\n", "").format(host=socket.gethostname(), root=self.root,
                                                                    ctld_port=ports[0])
        conf = conf.replace("SlurmdSpoolDir={}/spool".format(self.root), "SlurmdSpoolDir={}/spool/%n".format(self.root))
        conf = conf.replace("slurmd.pid", "slurmd-%n.pid").replace("slurmd.log", "slurmd-%n.log")
        for node in self.nodes:
            (self.root / "spool" / node).mkdir(mode=0o700, exist_ok=True)
        gres = f" Gres=gpu:{self.gpus_per_node}" if self.gpus_per_node else ""
        lines = [f"NodeName={node} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 Port={port} CPUs=1"
                 f"{gres} State=UNKNOWN" for node, port in zip(self.nodes, ports[1:], strict=True)]
        if self.gpus_per_node:
            conf += "GresTypes=gpu\n"
            # Count-only GPUs (no device files): the same on every node, so no NodeName= is needed.
            (self.root / "gres.conf").write_text("Name=gpu File=/dev/null\n" * self.gpus_per_node)
        for name, members in self.partition_nodes().items():
            default = " Default=YES" if name == self.partitions[0] else ""
            lines.append(f"PartitionName={name} Nodes={','.join(members)}{default} MaxTime=INFINITE State=UP")
        return conf + "\n".join(lines) + "\n"

    def partition_nodes(self) -> dict[str, list[str]]:
        """Partition -> its nodes: the nodes split in order, the first partition taking the remainder."""
        each, extra = divmod(len(self.nodes), len(self.partitions))
        out, at = {}, 0
        for k, name in enumerate(self.partitions):
            count = each + (extra if k == 0 else 0)
            out[name], at = self.nodes[at : at + count], at + count
        return out

    def _spawn(self, argv: list[str], name: str) -> None:
        out = (self.root / "log" / f"{name}.out").open("wb")
        self._procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env))

    def node_states(self) -> dict[str, str]:
        """Each node's state, e.g. 'idle', 'mix', 'alloc', 'comp', 'down*'."""
        done = subprocess.run(["sinfo", "-h", "-N", "-n", ",".join(self.nodes), "-o", "%N %t"], env=self.env,
                              capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            return {"sinfo": f"failed: {done.stderr.strip()}"}
        return dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())

    def sinfo(self) -> str:
        """Node states, e.g. 'idle', 'mix', 'comp' (each distinct state once, sorted)."""
        return " ".join(sorted(set(self.node_states().values())))

    def node_idle(self) -> bool:
        """Every node is up, runs nothing and has finished cleaning up."""
        states = self.node_states()
        return sorted(states) == sorted(self.nodes) and set(states.values()) == {"idle"}

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if any(p.poll() is not None for p in self._procs):
                raise RuntimeError(f"a Slurm daemon exited early; logs: {self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}; logs: {self.logs()}")

    @staticmethod
    def next_second() -> None:
        """Let the wall-clock second roll over.

        slurmctld skips a scheduling pass when no job changed since the last one,
        comparing whole-second timestamps: a change made in the same second as a
        pass goes unnoticed on an otherwise idle test cluster (a busy real one has
        other events). Tests call this before a change that must trigger a start.
        """
        time.sleep(1.05 - time.time() % 1.0)

    def logs(self) -> str:
        """Tail of each daemon log, for failure messages."""
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            parts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(parts)

    def scontrol_job(self, job_id: str) -> dict[str, str]:
        """``scontrol -o show job`` fields, parsed."""
        from greentrain.integrations.slurm import parse_job_record

        out = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=self.env, capture_output=True,
                             text=True, timeout=10, check=True).stdout
        return parse_job_record(out.splitlines()[0])

    def stop(self) -> None:
        """Stop every daemon we started, by pid, newest first."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self._procs.clear()
