"""Data-parallel training: a compiled training step whose batch runs as chunks on workers.

The step graph of a `TrainStep` (forward, backward and the optimizer's update, see
graphc/optim/train_step.py) is split along its batch dim like any graph (split.py):
the chunk graph computes, per chunk, the partials of the loss and of every gradient
(a mean loss's sum, x.T @ dy of the chunk's rows); the merge graph adds them; the
combine graph finishes the loss and the gradients and applies the optimizer, once,
on the client, where the parameters and the optimizer's state live.

Per step, the parameters the chunk graph reads are scattered to every worker once
(`client.scatter(..., broadcast=True)`), the chunks are submitted with their rows,
and the partials come back to the client. Results equal the single-process step's up
to the rounding of summing the batch in chunks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.distributed.deps import require
from graphc.distributed.split import split_batch
from graphc.distributed.worker import Program, merge_partials, run_graph
from graphc.ir.errors import FeedError, GraphcError
from graphc.optim.train_step import TrainStep
from graphc.runtime.feeds import as_feed_array, bind_dims


class DataParallelStep:
    """A `TrainStep` run data-parallel on a dask.distributed `Client`.

    `step(x, y)` splits the batch into `chunks` pieces (by default one per worker),
    runs them on the workers and applies the optimizer once on the client; it returns
    the loss. `parameters()` reads the trained parameters; `sync_to_model()` writes
    them (and the optimizer state) back into the TrainStep and the model.

    >>> import numpy as np, graphc as gc
    >>> from graphc import nn, optim
    >>> from dask.distributed import Client, LocalCluster
    >>> from graphc.distributed import DataParallelStep
    >>> model = nn.Linear(3, 1, dtype="float64", generator=0)
    >>> step = gc.compile_train_step(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1),
    ...                              (np.ones((8, 3)), np.zeros((8, 1))))
    >>> with LocalCluster(n_workers=2, processes=False) as cluster, Client(cluster) as client:
    ...     parallel = DataParallelStep(step, client)
    ...     losses = [float(parallel.step(np.ones((8, 3)), np.zeros((8, 1)))) for _ in range(20)]
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
    ) -> None:
        if not isinstance(train_step, TrainStep):
            raise GraphcError(
                "DataParallelStep: expected the TrainStep gc.compile_train_step returns, got "
                f"{type(train_step).__name__}"
            )
        distributed = require("distributed", "DataParallelStep")
        self.client = client if client is not None else distributed.get_client()
        self.train_step = train_step
        exe = train_step.executable
        self.updates = dict(exe.updates)  # state placeholder -> output with its new value
        self.split = split_batch(train_step.graph, batch_dim)
        mapped = [o.name for o in self.split.outputs if o.mapped]
        if mapped:
            raise GraphcError(
                f"DataParallelStep: the step's outputs {mapped} keep the batch dim; a training "
                "step returns its loss and updates only"
            )
        level = exe.opt_level if opt_level is None else opt_level
        chosen = backend or exe.backend.name
        self.programs = {
            role: Program.of(g, level, chosen)
            for role, g in (
                ("chunk", self.split.chunk),
                ("merge", self.split.merge),
                ("combine", self.split.combine),
            )
        }
        # the chunk graph's program goes to every worker once, for all steps
        [self._chunk_program] = self.client.scatter([self.programs["chunk"]], broadcast=True)
        self.chunks = chunks
        self.state: dict[str, np.ndarray] = exe.state

    def _workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def step(self, x: Any, y: Any) -> np.ndarray:
        """One training step on a batch; returns the loss before the update."""
        split = self.split
        data = dict(zip(split.batch_inputs, (x, y)))
        if len(data) != 2:
            raise GraphcError(
                f"DataParallelStep: the step graph's batch inputs are {list(split.batch_inputs)}"
            )
        bindings: dict[str, int] = {}
        for name, value in list(data.items()):
            node = split.graph.node(name)
            data[name] = as_feed_array(node, value)
            bind_dims(name, node.type, data[name].shape, bindings)
        rows = bindings[split.batch_dim]
        pieces = min(self.chunks or self._workers(), max(rows, 1))
        sizes = split.size_values(bindings)
        chunk_inputs = [p.name for p in split.chunk.inputs]
        wanted = [n for n in chunk_inputs if n in self.state]
        params = dict(
            zip(wanted, self.client.scatter([self.state[n] for n in wanted], broadcast=True))
        )
        parts = {
            name: np.array_split(array, pieces, axis=split.batch_inputs[name])
            for name, array in data.items()
        }
        futures = []
        for part in range(pieces):
            feeds = {
                **params,
                **sizes,
                **{name: split_rows[part] for name, split_rows in parts.items()},
            }
            args = [feeds[n] for n in chunk_inputs]
            futures.append(self.client.submit(run_graph, self._chunk_program, *args, pure=False))
        results = self.client.gather(futures)
        index = {o.name: j for j, o in enumerate(split.chunk.outputs)}
        picks = tuple(index[p.name] for p in split.partials)
        merged = dict(
            zip(
                (p.name for p in split.partials),
                merge_partials(self.programs["merge"], picks, *results),
            )
        )
        feeds = {**self.state, **sizes, **merged}
        missing = [p.name for p in split.combine.inputs if p.name not in feeds]
        if missing:
            raise FeedError(f"DataParallelStep: no value for {missing}")
        outs = run_graph(self.programs["combine"], *(feeds[p.name] for p in split.combine.inputs))
        named = dict(zip((o.name for o in split.combine.outputs), outs))
        for target, source in self.updates.items():
            self.state[target] = named[source]
        return named[split.outputs[0].name]

    __call__ = step

    def parameters(self) -> dict[str, np.ndarray]:
        """Copies of the trained parameters, by the model's parameter names."""
        self._push()
        return self.train_step.parameters()

    def sync_to_model(self) -> None:
        """Write the parameters and optimizer state into the TrainStep and the model."""
        self._push()
        self.train_step.sync_to_model()

    def _push(self) -> None:
        self.train_step.executable.set_state(**self.state)

    def __repr__(self) -> str:
        return f"<DataParallelStep of {self.train_step!r}, {self.split!r}>"
