"""Where measurement jobs run: worker processes on this machine, or tasks of a Ray cluster.

Both take `measure.Job`s and yield the log records as they finish (for the progress bar and the log).

* `LocalExecutor` -- on a GPU machine, two stages, as TVM's builders and runners: `builders` processes
  (default: half the CPU cores) check every candidate and run it once at the tuned sizes, spread over the
  GPUs -- compiling is the slow part and needs CPU, and Triton keeps what it compiled in its on-disk cache;
  then one timing process per GPU times the candidates that passed, alone on its GPU, from that cache.
  Processes are pinned to a GPU through CUDA_VISIBLE_DEVICES before CUDA starts in them.  On a machine
  without a GPU, `workers` processes check candidates under the Triton interpreter.  Processes are spawned,
  never forked, so no CUDA or Triton state of the parent leaks into them.
* `RayExecutor` (`--executor ray`, the `ray` extra) -- each job a Ray task asking for one GPU when the
  cluster has GPUs, else one CPU.  `address` is passed to `ray.init`: None starts a local instance,
  `"auto"` joins the cluster this machine belongs to, `"ray://host:10001"` a remote one.  tdsl must be
  installed on every node (the same version: the log records it).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from typing import Iterator, Optional

from tdsl.frontend.diagnostics import TdslError

from tdsl.compiler.tune.measure import Job, run_job


def local_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0


class LocalExecutor:
    def __init__(self, workers: Optional[int] = None, builders: Optional[int] = None):
        self.gpus = local_gpus()
        self.workers = workers or max(1, self.gpus)
        if self.gpus and self.workers > self.gpus:
            raise TdslError(f"--workers {self.workers} is more than the {self.gpus} local GPUs: two workers would "
                            f"time on one GPU and disturb each other's measurements")
        self.builders = builders or max(self.workers, (os.cpu_count() or 2) // 2) if self.gpus else 0
        self._pools: dict = {}  # role -> its worker processes, kept across the tuner's rounds until close()

    def describe(self) -> str:
        if not self.gpus:
            return f"{self.workers} local worker process{'es' * (self.workers != 1)} (no GPU: checks only, not timed)"
        return (f"{self.builders} checking and {self.workers} timing process{'es' * (self.workers != 1)} on "
                f"{self.gpus} GPU{'s' * (self.gpus != 1)}")

    def run(self, jobs: list[Job]) -> Iterator[dict]:
        if not self.gpus:
            for record, _ in self._each("check", self.workers, jobs):
                yield record
            return
        checked = {}
        for record, job in self._each("build", self.builders, [replace(j, stage="check") for j in jobs]):
            if record["ok"]:
                checked[job.steps] = (job, record)
            else:
                yield record
        for record, job in self._each("time", self.workers, [replace(j, stage="time") for j, _ in checked.values()]):
            first = checked[job.steps][1]
            yield {**first, **record, "detail": first["detail"] if record["ok"] else record.get("detail", "")}

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown()
        self._pools.clear()

    def _each(self, role: str, processes: int, jobs: list[Job]) -> Iterator[tuple]:
        """(record, job) of each job as it finishes, on the role's processes (started on first use)."""
        if role not in self._pools:
            self._pools[role] = _spawn(processes, self.gpus)
        futures = {self._pools[role].submit(run_job, job): job for job in jobs}
        for future in as_completed(futures):
            yield future.result(), futures[future]


def _spawn(processes: int, gpus: int) -> ProcessPoolExecutor:
    """`processes` spawned workers, pinned round-robin to the GPUs (or to the Triton interpreter)."""
    context = multiprocessing.get_context("spawn")
    slots = context.Queue()
    for n in range(processes):
        slots.put(n % gpus if gpus else -1)
    return ProcessPoolExecutor(processes, mp_context=context, initializer=_pin, initargs=(slots,))


def _pin(slots) -> None:
    """Worker start: its GPU, or the Triton interpreter when there is none."""
    gpu = slots.get()
    if gpu >= 0:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    else:
        os.environ["TRITON_INTERPRET"] = "1"


class RayExecutor:
    def __init__(self, address: Optional[str] = None, workers: Optional[int] = None):
        try:
            import ray
        except ImportError:
            raise TdslError("--executor ray needs Ray: pip install 'tdsl[ray]' (or pip install ray)") from None
        self.ray = ray
        if not ray.is_initialized():
            options = {"address": address} if address else {"num_cpus": workers or os.cpu_count() or 1}
            try:
                ray.init(ignore_reinit_error=True, log_to_driver=False, **options)
            except Exception as err:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ImportError (ray://)
                reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise TdslError(f"--executor ray: cannot start or reach {where}: {reason} (start a cluster with "
                                f"`ray start --head` and pass its address, or leave --ray-address out for a local "
                                f"instance)") from None
        self.gpus = int(ray.cluster_resources().get("GPU", 0))

    def describe(self) -> str:
        cpus = int(self.ray.cluster_resources().get("CPU", 0))
        where = f"{self.gpus} GPUs" if self.gpus else "no GPU: checks only, not timed"
        return f"Ray cluster with {cpus} CPUs ({where})"

    def run(self, jobs: list[Job]) -> Iterator[dict]:
        # Without a GPU, run_job itself switches the task's process to the Triton interpreter.
        task = self.ray.remote(num_gpus=1 if self.gpus else 0, num_cpus=1)(run_job)
        pending = [task.remote(job) for job in jobs]
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            try:
                record = self.ray.get(done[0])
            except self.ray.exceptions.RayError as err:  # the cluster, not the candidate: a worker or raylet died
                reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
                raise TdslError(f"--executor ray: the cluster failed while measuring ({type(err).__name__}: "
                                f"{reason}); the log keeps what was measured: rerun to resume") from None
            yield record

    def close(self) -> None:
        self.ray.shutdown()


def executor(kind: str, workers: Optional[int] = None, address: Optional[str] = None):
    if kind == "local":
        if address:
            raise TdslError("--ray-address is for --executor ray; the local executor runs on this machine")
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(address, workers)
    raise TdslError(f"unknown executor '{kind}' (local, ray)")
