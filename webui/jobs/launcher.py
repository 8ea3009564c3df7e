"""How many processes a training run uses, and the torchrun command that starts them.

These are torchrun's options, not the trainer's, so they are declared here (as ``Option`` records, so the
form builds and reads them with the same rules as the trainer's fields) and never in ``trainer.options``.
One process on one node is the plain ``python -m trainer.train ...``; anything else is

    python -m torch.distributed.run --nproc-per-node N --nnodes M (MIN:M for an elastic range)
        (--standalone | --rdzv-backend static --rdzv-endpoint HOST:PORT --node-rank R
         | --rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID --max-restarts K)
        --log-dir <output-dir>/ranks --tee 3 --shutdown-timeout S -m trainer.train <trainer argv>

A fixed set of nodes uses the static rendezvous: torch 2.13 ignores ``--node-rank`` for c10d, and with static
the node rank fixes the global ranks (node R runs ranks R*N .. R*N+N-1; node 0 hosts the store at HOST:PORT).
An elastic run (``min_nodes`` >= 1) uses c10d with ``--nnodes MIN:MAX``: the ranks follow the order the nodes
joined in, a lost node makes torchrun restart the workers with the nodes that remain (at most K times), and the
restarted trainers resume from the newest checkpoint (``--resume auto``, added when no resume is given;
``trainer.elastic`` switches an explicit path to ``auto`` after a restart). Every node must then see the same
output directory (a shared filesystem): the restarted rank 0 may be on another node.
``--tee 3`` keeps every rank's stdout and stderr in ``<output-dir>/ranks/<run>/attempt_<k>/<local rank>/``
as well as in the console (prefixed ``[default<local rank>]:``). ``--shutdown-timeout`` is the studio's stop
grace: when one worker exits, torchrun SIGTERMs the others and SIGKILLs them after this long, which must
never come before the studio itself gives up on a checkpoint save (see ``RunSupervisor.stop``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainer.options import Option

LAUNCH_MODULE = "torch.distributed.run"
TRAINER_MODULE = "trainer.train"
RANKS_DIR = "ranks"  # under the output dir: torchrun's --log-dir
STOP_GRACE_S = 120  # how long a stop waits for the checkpoint save; also torchrun's --shutdown-timeout
GROUP_PROCESSES = "Processes"

LAUNCH_OPTIONS: tuple[Option, ...] = (
    Option("nproc_per_node", "--nproc-per-node", "int", 1,
           "processes per node, one per GPU (2 or more runs the trainer under torchrun; on CPU the ranks talk "
           "over gloo)", GROUP_PROCESSES, minimum=1),
    Option("nnodes", "--nnodes", "int", 1,
           "machines taking part; more than 1 needs the rendezvous address and this machine's node rank",
           GROUP_PROCESSES, minimum=1),
    Option("rdzv_endpoint", "--rdzv-endpoint", "str", "",
           "rendezvous address HOST:PORT of node 0, the same on every node (only used with more than 1 node)",
           GROUP_PROCESSES),
    Option("node_rank", "--node-rank", "int", 0,
           "this machine's node rank, 0 .. nodes-1; node 0 hosts the rendezvous (only used with more than 1 node "
           "and no elastic range)", GROUP_PROCESSES, minimum=0),
    Option("min_nodes", "--min-nodes", "int", 0,
           "elastic: the fewest machines the run goes on with (0: a fixed set, every machine up at once); 1 or "
           "more runs torchrun's c10d rendezvous with --nnodes MIN:MAX (MAX: Machines), and a lost machine "
           "restarts the run from its last checkpoint with the machines that remain (the output folder must be "
           "on a filesystem every machine shares)", GROUP_PROCESSES, minimum=0),
    Option("max_restarts", "--max-restarts", "int", 3,
           "elastic: how many times torchrun restarts the run after a lost machine or a failed process "
           "(only used with an elastic range)", GROUP_PROCESSES, minimum=0),
)
LAUNCH_KEYS: tuple[str, ...] = tuple(option.name for option in LAUNCH_OPTIONS)
_ENDPOINT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9_.-]*):(\d{1,5})$")


class LaunchError(ValueError):
    """A launcher field holds something torchrun would refuse; the message is one line naming the field."""


@dataclass(frozen=True)
class Launch:
    nproc_per_node: int = 1
    nnodes: int = 1
    rdzv_endpoint: str = ""
    node_rank: int = 0
    min_nodes: int = 0  # 0: a fixed set of nodes; else the elastic range min_nodes .. nnodes (c10d)
    max_restarts: int = 3  # elastic only

    @property
    def distributed(self) -> bool:
        return self.nproc_per_node > 1 or self.nnodes > 1 or self.elastic

    @property
    def elastic(self) -> bool:
        return self.min_nodes > 0

    @property
    def nodes_text(self) -> str:
        """torchrun's ``--nnodes`` value: ``M``, or ``MIN:MAX`` for an elastic range."""
        return f"{self.min_nodes}:{self.nnodes}" if self.elastic else str(self.nnodes)

    def check(self) -> Launch:
        """Raise LaunchError for a combination torchrun cannot run; returns self."""
        for name in ("nproc_per_node", "nnodes", "node_rank", "min_nodes", "max_restarts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise LaunchError(f"{_flag(name)}: expected a whole number, got {value!r}")
        if self.nproc_per_node < 1:
            raise LaunchError(f"--nproc-per-node: processes per node must be at least 1, got {self.nproc_per_node}")
        if self.nnodes < 1:
            raise LaunchError(f"--nnodes: nodes must be at least 1, got {self.nnodes}")
        if self.min_nodes < 0 or self.max_restarts < 0:
            name = "min_nodes" if self.min_nodes < 0 else "max_restarts"
            raise LaunchError(f"{_flag(name)}: expected 0 or more, got {getattr(self, name)}")
        if self.min_nodes > self.nnodes:
            raise LaunchError(f"--min-nodes: the elastic range {self.min_nodes}:{self.nnodes} has MIN above MAX "
                              f"(Machines {self.nnodes})")
        if self.nnodes > 1 or self.elastic:
            if not self.rdzv_endpoint:
                who = "the machine that hosts the rendezvous" if self.elastic else "node 0"
                raise LaunchError(f"--rdzv-endpoint: {self.nodes_text} nodes need the rendezvous address HOST:PORT "
                                  f"of {who}")
            match = _ENDPOINT.match(self.rdzv_endpoint)
            if match is None or not 0 < int(match.group(2)) < 65536:
                raise LaunchError(f"--rdzv-endpoint: expected HOST:PORT (port 1-65535), got {self.rdzv_endpoint!r}")
            if not self.elastic and not 0 <= self.node_rank < self.nnodes:
                raise LaunchError(f"--node-rank: expected 0 .. {self.nnodes - 1} for {self.nnodes} nodes, "
                                  f"got {self.node_rank}")
        return self


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def default_values() -> dict[str, Any]:
    return {option.name: option.default for option in LAUNCH_OPTIONS}


def launch_of(values: dict[str, Any]) -> Launch:
    """The checked Launch of form values (missing launcher keys: one process on one node)."""
    merged = {**default_values(), **{k: values[k] for k in LAUNCH_KEYS if k in values}}
    endpoint = merged["rdzv_endpoint"]
    if not isinstance(endpoint, str) or "\n" in endpoint:
        raise LaunchError(f"--rdzv-endpoint: expected one line HOST:PORT, got {endpoint!r}")
    return Launch(nproc_per_node=merged["nproc_per_node"], nnodes=merged["nnodes"],
                  rdzv_endpoint=endpoint.strip(), node_rank=merged["node_rank"], min_nodes=merged["min_nodes"],
                  max_restarts=merged["max_restarts"]).check()


def ranks_dir(output_dir: str) -> str:
    return os.path.join(output_dir, RANKS_DIR) if output_dir else RANKS_DIR


def rdzv_id_of(output_dir: str) -> str:
    """The elastic rendezvous id: the output folder's name, which every node of one run shares (it is the same
    folder, on a shared filesystem), in the characters torchrun's run ids allow."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", os.path.basename(os.path.normpath(output_dir or "run"))).strip("-.")
    return f"studio-{name or 'run'}"


def with_auto_resume(trainer_args: Sequence[str]) -> list[str]:
    """``trainer_args`` with ``--resume auto`` where they resume from nothing: a restarted elastic group must
    continue from the newest checkpoint, as a resume does (an explicit path is kept; ``trainer.elastic``
    switches it to ``auto`` after a restart)."""
    args = list(trainer_args)
    for index, arg in enumerate(args):
        if arg == "--resume" and index + 1 < len(args):
            if not args[index + 1].strip():
                args[index + 1] = "auto"
            return args
        if arg.startswith("--resume="):
            if not arg.split("=", 1)[1].strip():
                args[index] = "--resume=auto"
            return args
    return [*args, "--resume", "auto"]


def command(launch: Launch, trainer_args: Sequence[str], output_dir: str, python: str = sys.executable,
            rdzv_conf: str = "") -> list[str]:
    """The command Start runs: the plain trainer for one process, else torchrun around it.

    ``rdzv_conf`` (elastic only) is torchrun's ``--rdzv-conf`` (e.g. ``join_timeout=60,is_host=true``)."""
    if not launch.distributed:
        return [python, "-m", TRAINER_MODULE, *trainer_args]
    argv = [python, "-m", LAUNCH_MODULE, "--nproc-per-node", str(launch.nproc_per_node),
            "--nnodes", launch.nodes_text]
    if launch.elastic:
        argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", launch.rdzv_endpoint,
                 "--rdzv-id", rdzv_id_of(output_dir), "--max-restarts", str(launch.max_restarts)]
        if rdzv_conf:
            argv += ["--rdzv-conf", rdzv_conf]
        trainer_args = with_auto_resume(trainer_args)
    elif launch.nnodes > 1:
        argv += ["--rdzv-backend", "static", "--rdzv-endpoint", launch.rdzv_endpoint,
                 "--node-rank", str(launch.node_rank)]
    else:
        argv.append("--standalone")
    argv += ["--log-dir", ranks_dir(output_dir), "--tee", "3", "--shutdown-timeout", str(STOP_GRACE_S),
             "-m", TRAINER_MODULE, *trainer_args]
    return argv


def is_launch_command(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a torchrun command (``python -m torch.distributed.run ...``)."""
    return len(argv) >= 3 and list(argv[1:3]) == ["-m", LAUNCH_MODULE]


def _launch_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    parser.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
    parser.add_argument("--nnodes", default="1")
    parser.add_argument("--standalone", action="store_true")
    parser.add_argument("--rdzv-backend", "--rdzv_backend", default="static")
    parser.add_argument("--rdzv-endpoint", "--rdzv_endpoint", default="")
    parser.add_argument("--node-rank", "--node_rank", type=int, default=0)
    parser.add_argument("--log-dir", "--log_dir", default="")
    parser.add_argument("--tee", "-t", default="")
    parser.add_argument("--shutdown-timeout", "--shutdown_timeout", default="")
    parser.add_argument("--rdzv-id", "--rdzv_id", default="")
    parser.add_argument("--rdzv-conf", "--rdzv_conf", default="")
    parser.add_argument("--max-restarts", "--max_restarts", type=int, default=0)
    return parser


def _nodes_range(text: str) -> tuple[int, int] | None:
    """(min nodes, max nodes) of torchrun's ``--nnodes`` (``M`` -> (0, M): a fixed set; ``MIN:MAX``), or None."""
    low, sep, high = text.partition(":")
    if not (low.isdigit() and (not sep or high.isdigit())):
        return None
    return (int(low), int(high)) if sep else (0, int(low))


def split_command(argv: Sequence[str]) -> tuple[Launch, list[str]] | None:
    """(Launch, trainer args) of a recorded run command, plain or torchrun; None if it is neither."""
    argv = list(argv)
    if len(argv) >= 3 and argv[1:3] == ["-m", TRAINER_MODULE]:
        return Launch(), argv[3:]
    if not is_launch_command(argv):
        return None
    rest = argv[3:]
    for index in range(len(rest) - 1):
        if rest[index:index + 2] == ["-m", TRAINER_MODULE]:
            try:
                known, unknown = _launch_parser().parse_known_args(rest[:index])
            except (argparse.ArgumentError, SystemExit):
                return None
            nodes = _nodes_range(known.nnodes)
            if unknown or nodes is None:
                return None
            elastic = known.rdzv_backend == "c10d"
            launch = Launch(nproc_per_node=known.nproc_per_node, nnodes=nodes[1],
                            rdzv_endpoint="" if known.standalone else known.rdzv_endpoint,
                            node_rank=0 if elastic else known.node_rank,
                            min_nodes=(nodes[0] or nodes[1]) if elastic else 0,
                            max_restarts=known.max_restarts if elastic else Launch.max_restarts)
            return launch, rest[index + 2:]
    return None


def values_of(launch: Launch) -> dict[str, Any]:
    return {"nproc_per_node": launch.nproc_per_node, "nnodes": launch.nnodes,
            "rdzv_endpoint": launch.rdzv_endpoint, "node_rank": launch.node_rank, "min_nodes": launch.min_nodes,
            "max_restarts": launch.max_restarts}


def module_command(processes: int, module: str, module_args: Sequence[str], python: str = sys.executable) -> list[str]:
    """A data job's command on this machine (the Data tab's preparation): ``python -m MODULE ARGS`` for one
    process, else torchrun starting ``processes`` of it, one per GPU (``data_tools.ranks`` shares the work).
    Its ranks' output is the console's (only rank 0 reports), so it keeps no per-rank log folder."""
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise LaunchError(f"processes: expected a whole number of at least 1, got {processes!r}")
    if processes == 1:
        return [python, "-m", module, *module_args]
    return [python, "-m", LAUNCH_MODULE, "--standalone", "--nproc-per-node", str(processes),
            "--shutdown-timeout", str(STOP_GRACE_S), "-m", module, *module_args]
