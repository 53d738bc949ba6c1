"""A replica of a data-parallel training step: one per worker, kept in the worker as a
dask actor, holding the parameters and the optimizer state between steps.

A step's round on replica r (`Replica.step`):

1. ask every other replica for its partials of the step's (epoch, applied) slot,
   straight from its worker (`Replica.partials`, an actor call between workers: the
   driver never sees them), and meanwhile
2. run the chunk graph on each chunk of the batch r was given, reading r's own
   parameters, and publish the chunks' partials under the slot;
3. once the others' answers are in, stack all the chunks' partials in chunk order,
   run the merge graph, then the combine graph (loss, gradients, the optimizer's
   update) and swap in the new state.

Every replica sums the same partials in the same order and runs the same programs, so
all replicas hold the same bits after each step, and the same bits as a run with the
same chunking on any other set of workers. Only the loss goes back to the driver, with
a fingerprint of the new state (`fingerprint`) for the driver to check the replicas
agree.

Recovery fences the survivors. `applied` counts the updates a replica has applied and
`epoch` numbers the driver's attempts; a step's update is swapped in only if the
replica's epoch is still the step's. `fence(epoch)` raises the epoch under the same
lock and reports `applied`, so once it has answered no stale step can change the
state: a replica is either at the step before the failed one (the step is retried) or
has applied it (the others copy its state, `copy_from`). Nothing here imports dask:
peers are the actor handles the driver passes in, and compute runs in the replica's
own thread, off the worker's event loop.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphc.distributed.split import BatchSplit
from graphc.distributed.worker import ChunkSpec, Program, chunk_error, merge_partials, run_graph
from graphc.ir.errors import GraphcError

Rows = dict[int, dict[str, np.ndarray]]  # chunk index -> that chunk's rows of each batch input


class ReplicaError(GraphcError):
    """A replica was asked for a step its state is not at (a stale or fenced attempt)."""


class PeerLostError(ReplicaError):
    """A replica could not fetch another replica's partials (its worker is gone, or it
    failed, or the wait timed out)."""


@dataclass(frozen=True)
class ReplicaSpec:
    """What every replica runs, sent once when it is created: the batch split's three
    programs and the names that wire them together."""

    chunk: Program
    merge: Program
    combine: Program
    chunk_inputs: tuple[str, ...]  # the chunk graph's placeholders, in order
    picks: tuple[int, ...]  # the partials' positions among the chunk graph's outputs
    partial_names: tuple[str, ...]  # the merge graph's outputs, in the picks' order
    combine_inputs: tuple[str, ...]
    combine_outputs: tuple[str, ...]
    updates: tuple[tuple[str, str], ...]  # (state placeholder, combine output with its new value)
    loss: str  # the combine output returned to the driver
    graph: str = "train_step"  # the step graph's name, for messages

    @classmethod
    def of(
        cls,
        split: BatchSplit,
        updates: dict[str, str],
        opt_level: int,
        backend: str,
        **flags: bool,
    ) -> ReplicaSpec:
        """The spec of a training step's batch split; `updates` maps each state
        placeholder to the output holding its new value (`Executable.updates`); `flags`
        are the step executable's check_numerics and fast_math (`Program.of`)."""
        index = {o.name: j for j, o in enumerate(split.chunk.outputs)}
        return cls(
            chunk=Program.of(split.chunk, opt_level, backend, **flags),
            merge=Program.of(split.merge, opt_level, backend, **flags),
            combine=Program.of(split.combine, opt_level, backend, **flags),
            chunk_inputs=tuple(p.name for p in split.chunk.inputs),
            picks=tuple(index[p.name] for p in split.partials),
            partial_names=tuple(p.name for p in split.partials),
            combine_inputs=tuple(p.name for p in split.combine.inputs),
            combine_outputs=tuple(o.name for o in split.combine.outputs),
            updates=tuple(updates.items()),
            loss=split.outputs[0].name,
            graph=split.graph.name,
        )


@dataclass(frozen=True)
class StepRequest:
    """One replica's part of a step. One object rather than several arguments: dask
    pickles it in one go, its arrays out of band, where it would walk dicts and lists
    and frame every array apart (a millisecond a step on small batches)."""

    epoch: int
    applied: int  # the updates the replica must hold: this step makes update applied + 1
    sizes: dict[str, np.ndarray]  # the size inputs' values for the whole batch
    rows: Rows  # this replica's chunks
    peers: tuple[Any, ...]  # the other replicas' actor handles
    timeout: float  # seconds to wait for a peer's partials
    chunks: int  # how many chunks the batch was cut into, all replicas' together
    # every chunk's rows of the batch, (start, stop), for naming a chunk that fails
    spans: tuple[tuple[int, int], ...] = field(default=())


@dataclass(frozen=True)
class Partials:
    """A replica's partials of one step, by chunk index (one object, as StepRequest)."""

    chunks: dict[int, tuple[np.ndarray, ...]]


@dataclass(frozen=True)
class Snapshot:
    """A replica's state after `applied` updates, and the loss of its last step."""

    applied: int
    state: dict[str, np.ndarray]
    loss: np.ndarray | None


class Replica:
    """One worker's copy of the training state (created by the driver with
    ``client.submit(Replica, spec, snapshot, name, actor=True, workers=[address])``)."""

    def __init__(self, spec: ReplicaSpec, snapshot: Snapshot, name: str) -> None:
        self.spec, self.name = spec, name
        self.epoch = 0
        self._install(snapshot)
        self._lock = threading.Lock()  # guards state, applied, loss and epoch together
        # one thread: a replica computes one thing at a time, never on the event loop
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"graphc-{name}")
        # (epoch, applied) -> this replica's partials of that step, once computed
        self._slots: dict[tuple[int, int], asyncio.Future] = {}
        self._waiting: set[asyncio.Task] = set()  # peer fetches a fence must interrupt

    def _install(self, snapshot: Snapshot) -> None:
        self.state = dict(snapshot.state)
        self.applied = snapshot.applied
        self.loss = snapshot.loss

    # -- a step ------------------------------------------------------------------------

    async def step(self, request: StepRequest) -> tuple[np.ndarray, float]:
        """Make update `request.applied + 1` from the request's chunks and its peers'
        partials; returns the loss and the new state's fingerprint (`fingerprint`)."""
        epoch, applied, sizes = request.epoch, request.applied, request.sizes
        peers, timeout, chunks = request.peers, request.timeout, request.chunks
        self._check(epoch, applied, "step")
        self._forget_before((epoch, applied))
        loop = asyncio.get_running_loop()
        if not peers:  # alone: the chunks and the update in one trip to the replica's thread
            return await loop.run_in_executor(self._executor, self._step_alone, request)
        slot = self._slot((epoch, applied))
        # ask the peers now: their answers travel while this replica computes its chunks
        fetch = asyncio.ensure_future(
            asyncio.gather(*(self._fetch(peer, epoch, applied, timeout) for peer in peers))
        )
        fetch.add_done_callback(_retrieve)
        self._waiting.add(fetch)
        try:
            try:
                mine = await loop.run_in_executor(self._executor, self._chunks, request)
            except BaseException as exc:
                _fail(slot, PeerLostError(f"{self.name} failed its chunks: {exc!r}"))
                raise
            if not slot.done():  # a fence may have failed the slot meanwhile
                slot.set_result(mine)
            if self.epoch != epoch or fetch.cancelled():
                raise ReplicaError(f"{self.name}: step {applied + 1} of epoch {epoch} was fenced")
            theirs = await asyncio.wait_for(fetch, timeout)
        except asyncio.CancelledError:
            raise ReplicaError(
                f"{self.name}: step {applied + 1} of epoch {epoch} was fenced while it waited "
                "for its peers' partials"
            ) from None
        except asyncio.TimeoutError:  # (not the builtin TimeoutError before Python 3.11)
            raise PeerLostError(
                f"{self.name}: no partials from its peers within {timeout} s for step {applied + 1}"
            ) from None
        finally:
            self._waiting.discard(fetch)
            fetch.cancel()  # no-op once done
        partials = dict(mine)
        for got in theirs:
            partials.update(got.chunks)
        ordered = self._ordered(partials, applied, chunks)
        return await loop.run_in_executor(
            self._executor, self._apply, epoch, applied, sizes, ordered
        )

    async def partials(self, epoch: int, applied: int, timeout: float) -> Partials:
        """This replica's partials of step `applied + 1` in `epoch`, waiting for them."""
        if epoch < self.epoch:
            raise ReplicaError(f"{self.name}: epoch {epoch} was fenced (now {self.epoch})")
        slot = self._slot((epoch, applied))
        try:
            return Partials(await asyncio.wait_for(asyncio.shield(slot), timeout))
        except asyncio.TimeoutError:  # (not the builtin TimeoutError before Python 3.11)
            raise PeerLostError(
                f"{self.name}: its own partials of step {applied + 1} were not ready within "
                f"{timeout} s"
            ) from None

    async def _fetch(self, peer: Any, epoch: int, applied: int, timeout: float) -> Partials:
        try:
            return await peer.partials(epoch, applied, timeout)
        except (ReplicaError, asyncio.CancelledError):
            raise
        except Exception as exc:  # the peer's worker is gone (OSError) or it failed
            raise PeerLostError(
                f"{self.name}: fetching {peer!r}'s partials failed: {exc!r}"
            ) from None

    def _chunks(self, request: StepRequest) -> dict[int, tuple[np.ndarray, ...]]:
        """The partials of the request's chunks; an error running one comes out as a
        ChunkError naming the chunk and its rows (worker.chunk_error)."""
        spec, applied, sizes = self.spec, request.applied, request.sizes
        with self._lock:
            if self.applied != applied:
                raise ReplicaError(
                    f"{self.name} holds the state after {self.applied} update(s); chunks of "
                    f"step {applied + 1} read the state after {applied}"
                )
            state = self.state  # never mutated: _apply swaps in a new dict
        out = {}
        for index, arrays in request.rows.items():
            feeds = {**state, **sizes, **arrays}
            try:
                result = run_graph(spec.chunk, *(feeds[n] for n in spec.chunk_inputs))
            except Exception as exc:
                raise chunk_error(exc, self._chunk_spec(request, index)) from exc
            out[index] = tuple(result[k] for k in spec.picks)
        return out

    def _chunk_spec(self, request: StepRequest, index: int) -> ChunkSpec:
        start, stop = request.spans[index] if request.spans else (0, 0)
        total = request.spans[-1][1] if request.spans else 0
        job = f"step {request.applied + 1} of DataParallelStep"
        return ChunkSpec(self.spec.graph, index, start, stop, total, (), (), job)

    def _step_alone(self, request: StepRequest) -> tuple[np.ndarray, float]:
        epoch, applied, sizes = request.epoch, request.applied, request.sizes
        partials = self._chunks(request)
        return self._apply(epoch, applied, sizes, self._ordered(partials, applied, request.chunks))

    def _ordered(self, partials: dict[int, tuple], applied: int, chunks: int) -> list[tuple]:
        """Every chunk's partials in chunk order: the one order every replica sums in."""
        if sorted(partials) != list(range(chunks)):
            raise ReplicaError(
                f"{self.name}: step {applied + 1} has partials of chunks {sorted(partials)}; "
                f"expected chunks 0 to {chunks - 1}, each once"
            )
        return [partials[i] for i in range(chunks)]

    def _apply(
        self, epoch: int, applied: int, sizes: dict[str, np.ndarray], ordered: list[tuple]
    ) -> tuple[np.ndarray, float]:
        spec = self.spec
        merged = dict(zip(spec.partial_names, merge_partials(spec.merge, None, *ordered)))
        state = self.state
        feeds = {**state, **sizes, **merged}
        outs = dict(
            zip(
                spec.combine_outputs,
                run_graph(spec.combine, *(feeds[n] for n in spec.combine_inputs)),
            )
        )
        new = dict(state)
        for target, source in spec.updates:
            new[target] = outs[source]
        with self._lock:
            if epoch != self.epoch or self.applied != applied:
                raise ReplicaError(
                    f"{self.name}: update {applied + 1} of epoch {epoch} arrived at the state "
                    f"after {self.applied} update(s) in epoch {self.epoch}; not applied"
                )
            self.state, self.applied, self.loss = new, applied + 1, outs[spec.loss]
        return outs[spec.loss], fingerprint(new)

    # -- slots --------------------------------------------------------------------------

    def _slot(self, key: tuple[int, int]) -> asyncio.Future:
        if key not in self._slots:
            self._slots[key] = asyncio.get_running_loop().create_future()
        return self._slots[key]

    def _forget_before(self, key: tuple[int, int]) -> None:
        """Drop the partials of earlier steps: the driver starts a step only once every
        replica has finished the one before (or has been fenced)."""
        for old in [k for k in self._slots if k < key]:
            _fail(self._slots.pop(old), ReplicaError(f"{self.name}: step slot {old} was dropped"))

    # -- recovery and reading ------------------------------------------------------------

    def _check(self, epoch: int, applied: int, what: str) -> None:
        with self._lock:
            if epoch != self.epoch or applied != self.applied:
                raise ReplicaError(
                    f"{self.name}: {what} of update {applied + 1} in epoch {epoch}, but the "
                    f"replica holds {self.applied} update(s) in epoch {self.epoch}"
                )

    async def fence(self, epoch: int) -> tuple[int, np.ndarray | None]:
        """Enter `epoch`: no update of an earlier epoch is applied from now on, and a step
        waiting for partials gives up. Returns (updates applied, the last step's loss)."""
        with self._lock:
            if epoch <= self.epoch:
                raise ReplicaError(f"{self.name}: fence to epoch {epoch}, already in {self.epoch}")
            self.epoch = epoch
            applied, loss = self.applied, self.loss
        for fetch in list(self._waiting):
            fetch.cancel()
        self._forget_before((epoch, -1))
        return applied, loss

    async def snapshot(self) -> Snapshot:
        """The state (parameters and optimizer state), a consistent copy."""
        with self._lock:
            return Snapshot(self.applied, dict(self.state), self.loss)

    async def copy_from(self, source: Any, epoch: int, timeout: float) -> int:
        """Take `source`'s state (another replica's actor handle), worker to worker, and
        enter `epoch`; returns the updates the copied state has applied."""
        try:
            snapshot = await asyncio.wait_for(source.snapshot(), timeout)
        except asyncio.TimeoutError:  # (not the builtin TimeoutError before Python 3.11)
            raise PeerLostError(
                f"{self.name}: no snapshot from {source!r} within {timeout} s"
            ) from None
        except Exception as exc:
            raise PeerLostError(
                f"{self.name}: copying {source!r}'s state failed: {exc!r}"
            ) from None
        with self._lock:
            if epoch < self.epoch:
                raise ReplicaError(f"{self.name}: copy for epoch {epoch}, already in {self.epoch}")
            self.epoch = epoch
            self._install(snapshot)
        self._forget_before((epoch, -1))
        return snapshot.applied

    async def close(self) -> None:
        """Drop the state and stop the replica's thread."""
        with self._lock:
            self.state = {}
        self._executor.shutdown(wait=False)

    def __repr__(self) -> str:
        return f"<Replica {self.name}: {self.applied} update(s), epoch {self.epoch}>"


def fingerprint(state: dict[str, np.ndarray]) -> float:
    """A number that differs between two states unless they are (almost surely) the same
    bits: every array's float64 sum, added in name order. Replicas report it with each
    loss so that the driver sees a replica drift, which the loss alone would not show
    (every replica's loss comes from the same shared partials)."""
    return float(sum(float(np.sum(state[name], dtype=np.float64)) for name in sorted(state)))


def _fail(slot: asyncio.Future, exc: Exception) -> None:
    """Fail a slot nobody may be waiting for, without asyncio's "exception was never
    retrieved" warning when it is dropped."""
    if not slot.done():
        slot.set_exception(exc)
    _retrieve(slot)


def _retrieve(future: asyncio.Future) -> None:
    """Mark a finished future's exception as seen: it is reported another way (a step's
    own error, a fence), and a cancelled gather ends with a CancelledError as exception."""
    if future.done() and not future.cancelled():
        future.exception()
