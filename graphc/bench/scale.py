"""Scaling out on dask (issue 18): one compiled plan in this process against the same
graph split by graphc.distributed over a LocalCluster of 1 and 2 worker processes.

Cases (float32 MLPs):

- inference over N rows of an on-disk array (`np.memmap`, as examples/out_of_core.py):
  the graph's outputs are the mean class probabilities and the rows per predicted
  class, so only partials travel back. The single-process plan reads the memmap
  whole; each dask task reads its chunk. Throughput = rows / median seconds;
- a training step on one batch (`DataParallelStep` against `TrainStep`): the
  parameters broadcast, the chunks' gradient partials gathered and the optimizer run
  on the client;
- per-chunk overhead: 64 chunks of 16 rows, whose work is negligible, so the median
  over 64 is what a chunk costs besides its rows (tasks, transfers, the plan call).
  This case runs on clusters whose scheduler does not queue root tasks
  (`distributed.scheduler.worker-saturation: inf`): with dask's default (1.1) the
  scheduler hands a worker thread one or two chunk reads at a time and waits for a
  round trip before the next, about 8 ms a chunk here, which is the right trade for
  chunks of 10^5 rows (a worker never holds more than a few) and the wrong one for
  tiny chunks; measured on 1 worker, 64 chunks took 723 ms with queuing, 204 ms without.

The dask modes start their clusters once per process (threads_per_worker=1), and time
`client.compute` of the lazy outputs end to end. Their peak memory is the largest
worker's resident set after a call (what "memory per worker" means here), not
this process's. Run with ``graphc bench --only scale`` (not in the default run: it
starts clusters and writes a file of N rows).
"""

from __future__ import annotations

import atexit
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import graphc as gc
from graphc import nn, optim
from graphc.bench.core import BASELINE, Case, Prepared, UnavailableError, Workload

ONE, TWO = "dask-1worker", "dask-2workers"
WORKERS = {ONE: 1, TWO: 2}
FEATURES, HIDDEN, CLASSES = 32, 128, 10
OVERHEAD_CHUNKS, OVERHEAD_ROWS = 64, 16
INFERENCE_1E7 = "inference 1e7 rows"
OVERHEAD_CASE = f"overhead {OVERHEAD_CHUNKS} chunks x {OVERHEAD_ROWS} rows"

_clusters: dict[tuple[int, bool], tuple[Any, Any]] = {}


def client(workers: int, queuing: bool = True) -> Any:
    """A Client of a LocalCluster of `workers` processes, started once per process;
    `queuing=False` starts its scheduler with root-task queuing off."""
    key = (workers, queuing)
    if key not in _clusters:
        try:
            import dask
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:
            raise UnavailableError(
                f'dask is not installed ({exc}): pip install "graphc[dask]"'
            ) from None
        settings = {} if queuing else {"distributed.scheduler.worker-saturation": float("inf")}
        with dask.config.set(settings):
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
        _clusters[key] = cluster, Client(cluster, set_as_default=False)
        atexit.register(_close, key)
    return _clusters[key][1]


def _close(key: tuple[int, bool]) -> None:
    cluster, c = _clusters.pop(key, (None, None))
    if c is not None:
        c.close()
        cluster.close()


def worker_bytes(c: Any) -> int:
    """The largest resident set among the cluster's workers."""
    import psutil

    return max(c.run(lambda: psutil.Process().memory_info().rss).values())


def scoring_graph() -> gc.Graph:
    g = gc.Graph("mlp_scoring")
    with g:
        x = gc.placeholder("x", shape=("B", FEATURES))
        w1 = gc.placeholder("w1", shape=(FEATURES, HIDDEN))
        b1 = gc.placeholder("b1", shape=(HIDDEN,))
        w2 = gc.placeholder("w2", shape=(HIDDEN, CLASSES))
        logits = gc.relu(x @ w1 + b1) @ w2
        # the mean in float64: float32 summed row after row over 1e7 rows drifts by
        # 5e-3 (one process's plan), where chunks summed apart do not
        probs = gc.cast(gc.softmax(logits, axis=-1), "float64")
        gc.output(gc.mean(probs, axis=0), name="mean_probs")
        counts = gc.sum(gc.one_hot(gc.argmax(logits, axis=-1), CLASSES), axis=0)
        gc.output(counts, name="class_counts")
    return g


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)).astype(np.float32),
    }


def read_rows(path: str, start: int, stop: int) -> np.ndarray:
    return np.array(np.load(path, mmap_mode="r")[start:stop])


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    rows, chunk = params["rows"], params["chunk"]
    if params["kind"] == "step":
        rng = np.random.default_rng(0)
        x = rng.standard_normal((rows, FEATURES), dtype=np.float32)
        return {"x": x, "y": rng.integers(0, CLASSES, rows)}
    path = Path(tempfile.mkdtemp(prefix="graphc_scale_")) / "rows.npy"
    data = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, FEATURES))
    step = max(chunk, 1 << 18)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        data[start:stop] = np.random.default_rng(start).standard_normal(
            (stop - start, FEATURES), dtype=np.float32
        )
    data.flush()
    del data
    return {"path": str(path), "weights": weights()}


def _single(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    if params["kind"] == "step":
        step = _train_step(inputs)
        return Prepared(lambda: step.step(inputs["x"], inputs["y"]), resident_bytes=0)
    exe = gc.compile(scoring_graph(), backend="numpy")
    x = np.asarray(np.load(inputs["path"], mmap_mode="r"))  # a plain view: memmap is a subclass
    return Prepared(lambda: exe(x, **inputs["weights"]))


def _dask(mode: str) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        c = client(WORKERS[mode], queuing=params.get("queuing", True))
        if params["kind"] == "step":
            from graphc.distributed import DataParallelStep

            parallel = DataParallelStep(_train_step(inputs), c, chunks=WORKERS[mode])
            return Prepared(
                lambda: parallel.step(inputs["x"], inputs["y"]), resident_bytes=worker_bytes(c)
            )
        import dask
        import dask.array as da

        from graphc.distributed import map_batches

        rows, chunk = params["rows"], params["chunk"]
        read = dask.delayed(read_rows, pure=True)
        blocks = [
            da.from_delayed(
                read(inputs["path"], s, min(rows, s + chunk)),
                (min(rows, s + chunk) - s, FEATURES),
                np.float32,
            )
            for s in range(0, rows, chunk)
        ]
        lazy = map_batches(
            scoring_graph(), da.concatenate(blocks), **inputs["weights"], backend="numpy"
        )

        def call() -> Any:
            return c.gather(c.compute(list(lazy)))

        call()  # compile on the workers before the memory is read
        note = "peak: largest worker's RSS"
        if not params.get("queuing", True):
            note += "; root-task queuing off (worker-saturation inf)"
        return Prepared(call, resident_bytes=worker_bytes(c), note=note)

    return build


def _train_step(inputs: dict[str, Any]) -> Any:
    model = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN, generator=1), nn.ReLU(), nn.Linear(HIDDEN, CLASSES, generator=2)
    )
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = inputs["x"], inputs["y"]
    return gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, (x, y), backend="numpy")


WORKLOAD = Workload(
    name="scale",
    description="graphc.distributed on a LocalCluster of 1 and 2 workers against one "
    "process's plan: MLP inference over an on-disk array, an MLP training step, the "
    "overhead per chunk",
    unit="call",
    cases=[
        Case("inference 1e6 rows", {"kind": "infer", "rows": 10**6, "chunk": 250_000}),
        Case(INFERENCE_1E7, {"kind": "infer", "rows": 10**7, "chunk": 250_000}, quick=False),
        Case("step B=8192", {"kind": "step", "rows": 8192, "chunk": 4096}),
        Case(
            OVERHEAD_CASE,
            {
                "kind": "infer",
                "rows": OVERHEAD_CHUNKS * OVERHEAD_ROWS,
                "chunk": OVERHEAD_ROWS,
                "queuing": False,
            },
        ),
    ],
    make_inputs=_inputs,
    builders={BASELINE: _single, ONE: _dask(ONE), TWO: _dask(TWO)},
    tolerance=1e-4,
    reference=BASELINE,
)
