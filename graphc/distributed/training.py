"""Data-parallel training: a compiled training step whose batch runs as chunks on workers,
where replicas of the parameters and the optimizer state live.

The step graph of a `TrainStep` (forward, backward and the optimizer's update, see
graphc/optim/train_step.py) is split along its batch dim like any graph (split.py):
the chunk graph computes, per chunk, the partials of the loss and of every gradient;
the merge graph adds them; the combine graph finishes the loss and the gradients and
applies the optimizer. Each worker keeps a `Replica` (replica.py, a dask actor) with
its own copy of the parameters and the optimizer state.

Per step the driver sends each replica its chunks' rows, straight to its worker (an
actor call, not a task); the replicas exchange their partials worker to worker, each
sums all the chunks' partials in chunk order and applies the same update, and each
returns the loss and a fingerprint of its new state (the driver checks that the
replicas agree); nothing else comes back. The batch is always cut into the same
`chunks` pieces (by default one per worker at the start), dealt round-robin to the
replicas, so the partials and their sum do not depend on how many workers there are.

Statistics of the labels (a loss divided by the weight of the rows not ignored) that
the rows need are computed by the driver from the whole batch before it is cut, and
travel with the batch's sizes (`_split_step`).

Failures. Every wait polls: between slices it asks the scheduler which workers are
alive, and gives up after `timeout` seconds with a `StepTimeoutError`. When a worker
holding a replica is gone or a replica fails, the driver settles the replicas: it
fences the survivors into a new epoch (after which no update of the failed attempt can
land), reads how many updates each applied, copies the most advanced state into the
others and into replicas created on new workers (worker to worker), then either
returns the step's loss (some replica had applied it) or runs the step again. The
same chunks summed in the same order give the same bits as a run without the failure.
"""

from __future__ import annotations

import contextlib
import math
import time
import uuid
import warnings
from typing import Any

import numpy as np

from graphc.distributed.deps import require
from graphc.distributed.replica import Replica, ReplicaError, ReplicaSpec, Snapshot, StepRequest
from graphc.distributed.split import BatchSplit, BatchSplitError, split_batch
from graphc.distributed.stages import split_stages
from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph
from graphc.optim.train_step import TrainStep
from graphc.runtime.executable import Executable, compile
from graphc.runtime.feeds import as_feed_array, bind_dims

POLL_SECONDS = 0.25  # how often a wait checks that the replicas' workers are alive
SCHEDULER_SECONDS = 30.0  # how long asking the scheduler which workers are alive may take
GRACE_SECONDS = 5.0  # how long a failed step waits for its other replicas' answers
RUNNING = ("running", "paused")  # workers' statuses in scheduler_info that take actor calls


class StepTimeoutError(GraphcError, TimeoutError):
    """A wait on the workers took longer than the DataParallelStep's `timeout`."""


class WorkerLostError(GraphcError):
    """Workers holding replicas were lost more often than `retries` allows, or all of
    them at once (then the state after the last step exists nowhere)."""


class _LostError(Exception):
    """One attempt failed because a replica or its worker is gone (recoverable)."""


class DataParallelStep:
    """A `TrainStep` run data-parallel on a dask.distributed `Client`, with a replica of
    the parameters and optimizer state on every worker.

    `step(x, y)` cuts the batch into `chunks` pieces (by default one per worker at the
    start; the number then stays, so a lost worker changes who computes a piece, not the
    pieces), runs them on the workers, which reduce the gradients among themselves and
    apply the same update; it returns the loss. A lost worker is survived: the step is run again on
    the remaining (and new) workers, with the same result, up to `retries` times a
    step. No wait lasts more than `timeout` seconds (`StepTimeoutError`); workers that
    join get a replica within `rescan_every` seconds. `parameters()` reads the trained
    parameters from a replica; `sync_to_model()` writes them (and the optimizer state)
    back into the TrainStep and the model. `close()` drops the replicas.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn, optim
    >>> from dask.distributed import Client, LocalCluster
    >>> from graphc.distributed import DataParallelStep
    >>> model = nn.Linear(3, 1, dtype="float64", generator=0)
    >>> step = gc.compile_train_step(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1),
    ...                              (np.ones((8, 3)), np.zeros((8, 1))))
    >>> with LocalCluster(n_workers=2, processes=False) as cluster, Client(cluster) as client:
    ...     with DataParallelStep(step, client) as parallel:
    ...         losses = [float(parallel.step(np.ones((8, 3)), np.zeros((8, 1))))
    ...                   for _ in range(20)]
    ...         parallel.sync_to_model()
    >>> losses[-1] < 1e-3 < losses[0]
    True
    """

    def __init__(
        self,
        train_step: TrainStep,
        client: Any = None,
        chunks: int | None = None,
        batch_dim: str = "B",
        opt_level: int | None = None,
        backend: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        rescan_every: float = 2.0,
    ) -> None:
        if not isinstance(train_step, TrainStep):
            raise GraphcError(
                "DataParallelStep: expected the TrainStep gc.compile_train_step returns, got "
                f"{type(train_step).__name__}"
            )
        distributed = require("distributed", "DataParallelStep")
        self.client = client if client is not None else distributed.get_client()
        self.train_step = train_step
        self.timeout, self.retries, self.rescan_every = timeout, retries, rescan_every
        exe = train_step.executable
        level = exe.opt_level if opt_level is None else opt_level
        self.split, self._statistics = _split_step(train_step.graph, batch_dim, level)
        split = self.split
        mapped = [o.name for o in split.outputs if o.mapped]
        if mapped:
            raise GraphcError(
                f"DataParallelStep: the step's outputs {mapped} keep the batch dim; a training "
                "step returns its loss and updates only"
            )
        chosen = backend or exe.backend.name
        flags = {"check_numerics": exe.check_numerics, "fast_math": exe.fast_math}
        self.spec = ReplicaSpec.of(split, exe.updates, level, chosen, **flags)
        self.name = f"graphc-replica-{uuid.uuid4().hex[:8]}"
        self.epoch = 0  # the driver's attempt number: replicas refuse older ones
        self.applied = 0  # updates every replica holds
        self._replicas: dict[str, Any] = {}  # worker address -> the replica's actor handle
        self._actors: dict[str, Any] = {}  # address -> its creation future (keeps it alive)
        self._unsettled = False  # an attempt failed: fence and settle before the next
        self._last_loss: np.ndarray | None = None
        self._closed = False
        workers = self._alive()
        if not workers:
            raise WorkerLostError("DataParallelStep: the client's cluster has no workers")
        if chunks is not None and chunks < 1:
            raise GraphcError(f"DataParallelStep: chunks must be at least 1, got {chunks}")
        self.chunks = chunks or len(workers)
        self._add(workers, Snapshot(0, exe.state, None))
        self._scanned = time.monotonic()

    # -- a step -------------------------------------------------------------------------

    def step(self, x: Any, y: Any) -> np.ndarray:
        """One training step on a batch; returns the loss before the update."""
        self._check_open()
        self.train_step.check_current()  # a changed hyperparameter: as TrainStep.step says
        rows, sizes = self._pieces(x, y)
        sizes.update(self.train_step.fed_hyperparameters())  # a scheduled lr, every step
        failures: list[str] = []
        target = None  # the update this call makes, once known
        for _attempt in range(self.retries + 1):
            try:
                if self._unsettled or (target is None and self._rescan_due()):
                    self._settle(in_flight=target)
                if target is None:
                    target = self.applied + 1
                elif self.applied == target:  # a survivor had applied the failed attempt
                    return self._last_loss
                return self._run(rows, sizes)
            except _LostError as lost:
                failures.append(str(lost))
                self._unsettled = True
            except BaseException:
                self._unsettled = True  # a timeout, a remote error: settle before the next step
                raise
        raise WorkerLostError(
            f"DataParallelStep: step {target or self.applied + 1} failed {len(failures)} times, "
            f"more than the {self.retries} retries allowed: " + "; ".join(failures)
        )

    __call__ = step

    def _pieces(self, x: Any, y: Any) -> tuple[list[dict[str, np.ndarray]], dict[str, np.ndarray]]:
        """The batch's rows cut into chunks (each a dict of the batch inputs), and the
        size inputs' values for the whole batch."""
        split = self.split
        if len(split.batch_inputs) != 2:
            raise GraphcError(
                f"DataParallelStep: the step graph's batch inputs are {list(split.batch_inputs)}"
            )
        data = dict(zip(split.batch_inputs, (x, y)))
        bindings: dict[str, int] = {}
        for name, value in list(data.items()):
            node = split.graph.node(name)
            data[name] = as_feed_array(node, value)
            bind_dims(name, node.type, data[name].shape, bindings)
        pieces = min(self.chunks, max(bindings[split.batch_dim], 1))
        parts = {
            name: np.array_split(array, pieces, axis=split.batch_inputs[name])
            for name, array in data.items()
        }
        rows = [{name: parts[name][i] for name in parts} for i in range(pieces)]
        return rows, {**split.size_values(bindings), **self._statistics_of(data)}

    def _statistics_of(self, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The batch statistics the rows need (`_split_step`), computed here from the
        whole batch's rows: each pass's values, by the placeholder name the step reads."""
        values: dict[str, np.ndarray] = {}
        for exe, feeds in self._statistics:
            given = {**data, **values}
            out = exe(**{p.name: given[p.name] for p in exe.graph.inputs})
            out = out if isinstance(out, tuple) else (out,)
            values.update((feeds[o.name], v) for o, v in zip(exe.graph.outputs, out))
        return values

    def _run(self, rows: list[dict[str, np.ndarray]], sizes: dict[str, np.ndarray]) -> np.ndarray:
        """One attempt: every replica gets its chunks and the others' handles."""
        replicas = list(self._replicas.items())
        first, axis = next(iter(self.split.batch_inputs.items()))
        ends = np.cumsum([piece[first].shape[axis] for piece in rows]).tolist()
        spans = tuple(zip([0, *ends[:-1]], ends))  # each chunk's rows, to name a failing one
        calls = {}
        for j, (address, _) in enumerate(replicas):
            mine = {i: rows[i] for i in range(j, len(rows), len(replicas))}
            peers = tuple(other for a, other in replicas if a != address)
            request = StepRequest(
                self.epoch, self.applied, sizes, mine, peers, self.timeout, len(rows), spans
            )
            calls[address] = self._call(address, "step", request)
        answers = self._wait(calls, f"step {self.applied + 1}")
        loss, mark = next(iter(answers.values()))
        if any(
            other.tobytes() != loss.tobytes() or not _same_fingerprint(state, mark)
            for other, state in answers.values()
        ):
            raise ReplicaError(
                f"DataParallelStep: the replicas' losses or states after step {self.applied + 1} "
                f"differ (loss, state fingerprint by worker: {answers}); they should hold the "
                "same bits"
            )
        self.applied += 1
        self._last_loss = loss
        return loss

    # -- waiting --------------------------------------------------------------------------

    def _call(self, address: str, method: str, *args: Any) -> Any:
        try:
            return getattr(self._replicas[address], method)(*args)
        except RuntimeError as exc:  # "Worker holding Actor was lost"
            raise _LostError(f"the replica on {address}: {exc}") from None

    def _wait(self, calls: dict[str, Any], what: str) -> dict[str, Any]:
        """Every call's result, by worker address. Raises _LostError when a replica fails or
        its worker leaves, StepTimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + self.timeout
        results: dict[str, Any] = {}
        for address, call in calls.items():
            while address not in results:
                left = deadline - time.monotonic()
                if left <= 0:
                    slow = [a for a in calls if a not in results]
                    raise StepTimeoutError(
                        f"DataParallelStep: {what} did not finish within {self.timeout} s "
                        f"(its timeout); still waiting for the replicas on {slow}"
                    )
                try:
                    results[address] = call.result(timeout=min(POLL_SECONDS, left))
                except TimeoutError:
                    gone = set(self._replicas) - set(self._alive())
                    if gone:
                        raise _LostError(f"worker(s) {sorted(gone)} left during {what}") from None
                except (ReplicaError, OSError) as exc:
                    # a replica's own failure (a chunk's error), not its peers' echo of it
                    self._finish(calls, deadline)
                    _raise_first_error(calls)
                    raise _LostError(f"the replica on {address} failed {what}: {exc}") from None
        return results

    def _finish(self, calls: dict[str, Any], deadline: float) -> None:
        """Wait until every call is done (or `GRACE_SECONDS` passed, or a worker left):
        when one replica's chunk fails, its peers fail at once for want of its partials,
        and their errors may arrive before its own."""
        until = min(deadline, time.monotonic() + GRACE_SECONDS)
        checked = time.monotonic()
        while not all(call.done() for call in calls.values()):
            now = time.monotonic()
            if now >= until:
                return
            if now - checked >= POLL_SECONDS:
                checked = now
                if set(self._replicas) - set(self._alive()):
                    return
            time.sleep(0.01)

    def _alive(self) -> list[str]:
        """The addresses of the cluster's workers that can hold a replica."""
        client = self.client
        try:  # scheduler_info() has no timeout: ask the scheduler with one
            info = client.sync(
                client.scheduler.identity, n_workers=-1, callback_timeout=SCHEDULER_SECONDS
            )
        except TimeoutError:
            raise StepTimeoutError(
                f"DataParallelStep: the scheduler did not say which workers are alive within "
                f"{SCHEDULER_SECONDS} s"
            ) from None
        workers = info["workers"]
        return sorted(a for a, about in workers.items() if about.get("status") in RUNNING)

    def _rescan_due(self) -> bool:
        """Every `rescan_every` seconds: has a worker joined or left?"""
        if time.monotonic() - self._scanned < self.rescan_every:
            return False
        self._scanned = time.monotonic()
        return set(self._alive()) != set(self._replicas)

    # -- settling after a failure --------------------------------------------------------

    def _settle(self, in_flight: int | None) -> None:
        """Fence the surviving replicas, bring them and replicas on new workers to the
        most advanced state; `self.applied` becomes its count of updates. `in_flight`:
        the update this call attempted (None: none yet)."""
        applied, loss = self._settle_replicas()
        if applied == self.applied + 1 and in_flight != applied:
            warnings.warn(
                f"DataParallelStep: update {applied}, whose step raised an error, had been "
                "applied by a replica before the failure; every replica now holds it",
                RuntimeWarning,
                stacklevel=4,
            )
        elif applied not in (self.applied, self.applied + 1):
            raise ReplicaError(
                f"DataParallelStep: the replicas hold {applied} update(s), the driver "
                f"expected {self.applied} or {self.applied + 1}"
            )
        self.applied, self._last_loss = applied, loss
        self._unsettled = False

    def _settle_replicas(self) -> tuple[int, np.ndarray | None]:
        self.epoch += 1
        alive = self._alive()
        for address in [a for a in self._replicas if a not in alive]:
            self._drop(address)
        calls = {}
        for address in list(self._replicas):
            try:
                calls[address] = self._call(address, "fence", self.epoch)
            except _LostError:
                self._drop(address)
        fenced: dict[str, tuple[int, Any]] = {}
        slow: dict[str, StepTimeoutError] = {}
        for address, call in calls.items():
            try:
                fenced.update(self._wait({address: call}, f"fencing epoch {self.epoch}"))
            except _LostError:  # unreachable: never used again
                self._drop(address)
            except StepTimeoutError as exc:
                slow[address] = exc
        if not fenced and slow:  # slow, not lost: keep them; the next call fences again
            raise next(iter(slow.values()))
        for address in slow:  # a fresh copy of an answering replica replaces each below
            self._drop(address)
        if not fenced:
            raise WorkerLostError(
                f"DataParallelStep: every worker holding a replica was lost; the state after "
                f"update {self.applied} exists nowhere (the driver's TrainStep holds the state "
                "of the last parameters() or sync_to_model() call)"
            )
        applied = max(n for n, _ in fenced.values())
        source = next(a for a, (n, _) in fenced.items() if n == applied)
        self._copy(source, [a for a, (n, _) in fenced.items() if n != applied])
        self._add([a for a in alive if a not in self._replicas], source)
        return applied, fenced[source][1]

    def _copy(self, source: str, targets: list[str]) -> None:
        """Copy `source`'s state into the replicas on `targets`, worker to worker."""
        calls = {
            a: self._call(a, "copy_from", self._replicas[source], self.epoch, self.timeout)
            for a in targets
        }
        try:
            self._wait(calls, f"copying the state of {source}")
        except _LostError:
            self._unsettled = True
            raise

    def _add(self, workers: list[str], source: Snapshot | str) -> None:
        """Create replicas on `workers`: from a snapshot (the first ones) or as copies of
        the replica on worker `source`."""
        if not workers:
            return
        initial = source if isinstance(source, Snapshot) else Snapshot(-1, {}, None)
        futures = {
            a: self.client.submit(
                Replica,
                self.spec,
                initial,
                f"{self.name}@{a}",
                actor=True,
                workers=[a],
                allow_other_workers=False,  # never recreated elsewhere from `initial`
                key=f"{self.name}-{uuid.uuid4().hex[:8]}",
            )
            for a in workers
        }
        deadline = time.monotonic() + self.timeout
        for address, future in futures.items():
            try:
                with self.client.as_current():  # an actor handle binds to the current client
                    handle = future.result(timeout=max(0.0, deadline - time.monotonic()))
                    handle.fence  # noqa: B018 (looking a method up binds the handle)
            except Exception as exc:
                future.release()
                if isinstance(source, str):
                    continue  # a new worker that is not ready: the next rescan tries again
                if isinstance(exc, TimeoutError):
                    raise StepTimeoutError(
                        f"DataParallelStep: no replica started on {address} within {self.timeout} s"
                    ) from None
                raise
            self._replicas[address], self._actors[address] = handle, future
        if isinstance(source, str):
            self._copy(source, [a for a in workers if a in self._replicas])

    def _drop(self, address: str) -> None:
        self._replicas.pop(address, None)
        future = self._actors.pop(address, None)
        if future is not None:
            future.release()

    # -- reading the state -----------------------------------------------------------------

    def states(self) -> dict[str, dict[str, np.ndarray]]:
        """Every replica's state (parameters and optimizer state), by worker address."""
        self._check_open()
        try:
            calls = {a: self._call(a, "snapshot") for a in self._replicas}
            return {a: s.state for a, s in self._wait(calls, "reading the replicas").items()}
        except _LostError as lost:
            self._unsettled = True
            raise WorkerLostError(
                f"DataParallelStep: reading every replica failed: {lost}"
            ) from None

    def _snapshot(self) -> Snapshot:
        self._check_open()
        for _attempt in range(self.retries + 1):
            try:
                if self._unsettled:
                    self._settle(in_flight=None)
                address = next(iter(self._replicas))
                return self._wait({address: self._call(address, "snapshot")}, "a snapshot")[address]
            except _LostError:
                self._unsettled = True
        raise WorkerLostError("DataParallelStep: no replica answered for its state")

    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the trained parameters (read from a replica), by the model's names."""
        self._push()
        return self.train_step.parameters()

    def sync_to_model(self) -> None:
        """Write the parameters and optimizer state into the TrainStep and the model."""
        self._push()
        self.train_step.sync_to_model()

    def _push(self) -> None:
        self.train_step.executable.set_state(**self._snapshot().state)

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Drop every replica (its state and thread) from the workers."""
        calls = {}
        for address in list(self._replicas):
            with contextlib.suppress(_LostError):
                calls[address] = self._call(address, "close")
        # a replica that cannot be reached is dropped with its worker
        with contextlib.suppress(_LostError, StepTimeoutError):
            self._wait(calls, "closing the replicas")
        for address in list(self._replicas):
            self._drop(address)
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise GraphcError("DataParallelStep: closed; its replicas were dropped")

    def __enter__(self) -> DataParallelStep:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<DataParallelStep of {self.train_step!r}, {len(self._replicas)} replica(s), "
            f"{self.chunks} chunk(s), {self.applied} step(s)>"
        )


def _split_step(
    graph: Graph, batch_dim: str, opt_level: int
) -> tuple[BatchSplit, list[tuple[Executable, dict[str, str]]]]:
    """The step graph's batch split, and the passes that compute the batch statistics
    its rows need when they read the batch inputs only (stages.py): a loss normalized by
    a count of the labels (cross entropy with weight, ignore_index or label_smoothing
    divides by the weight of the rows not ignored). The driver holds the whole batch, so
    it computes those (one process, before the rows are cut) and sends them with the
    batch's sizes; statistics of values the parameters make are refused, as the split
    refuses them."""
    try:
        return split_batch(graph, batch_dim), []
    except BatchSplitError as refusal:
        try:
            stages = split_stages(graph, batch_dim)
        except BatchSplitError:
            raise refusal from None
        readable = {p.name for p in graph.inputs if batch_dim in p.type.shape}
        for stage in stages[:-1]:
            if any(p.name not in readable for p in stage.split.graph.inputs):
                raise refusal from None
            readable |= set(stage.feeds.values())
        passes = [(compile(s.split.graph, opt_level=opt_level), s.feeds) for s in stages[:-1]]
        return stages[-1].split, passes


def _same_fingerprint(a: float, b: float) -> bool:
    """Do two replicas' fingerprints agree? A state holding a nan or both infinities (a
    diverged run, a nan in the batch) has a nan fingerprint on every replica alike,
    which `==` would call a drift."""
    return a == b or (math.isnan(a) and math.isnan(b))


def _raise_first_error(calls: dict[str, Any]) -> None:
    """Raise the error of a finished call that is not a replica's or a comm's (a remote
    FeedError, a bug), the one that made the peers fail; return if there is none."""
    for call in calls.values():
        if call.done():
            try:  # not timeout=0: an actor future's result() then times out done or not
                call.result(timeout=POLL_SECONDS)
            except (ReplicaError, OSError):
                continue
            except Exception:
                raise
