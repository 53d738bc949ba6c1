"""Scaling out on dask (issue 18): one compiled plan in this process against the same
graph split by graphc.distributed over a LocalCluster of 1 and 2 worker processes.

Cases (float32 MLPs):

- inference over N rows of an on-disk array (`np.memmap`, as examples/out_of_core.py):
  the graph's outputs are the mean class probabilities and the rows per predicted
  class, so only partials travel back. The single-process plan reads the memmap
  whole; each dask task reads its chunk. Throughput = rows / median seconds;
- a training step on one batch (`DataParallelStep` against `TrainStep`), with the
  parameters and optimizer state kept in a replica per worker, the gradient partials
  exchanged between the workers and only the loss coming back (issue 31): the 32-128-10
  MLP at B=8192, the same MLP at B=64 (its work is negligible: the time is what a step
  costs besides it) and a 256-512-10 MLP at B=4096 (enough work for two workers of one
  thread each to be set against one process with two). These run on clusters of their
  own (`training_client`: a direct_to_workers client, workers with glibc's allocator
  defaults);
- per-chunk overhead: 64 chunks of 16 rows, whose work is negligible, so the median
  over 64 is what a chunk costs besides its rows (tasks, transfers, the plan call).
  This case runs on clusters whose scheduler does not queue root tasks
  (`distributed.scheduler.worker-saturation: inf`): with dask's default (1.1) the
  scheduler hands a worker thread one or two chunk reads at a time and waits for a
  round trip before the next, about 8 ms a chunk here, which is the right trade for
  chunks of 10^5 rows (a worker never holds more than a few) and the wrong one for
  tiny chunks; measured on 1 worker, 64 chunks took 723 ms with queuing, 204 ms without.

- out of core (issue 31): 1 GiB of rows through 2 workers limited to 200 MB each, with
  ``chunks="auto"``: graphc sizes the chunks to the workers' memory limits. The file is
  read in blocks of 65,536 rows by one task group (a `map_blocks`), so dask queues the
  reads and a worker never reads far ahead of its chunks. One call (it takes tens of
  seconds), given up as stalled after OUT_OF_CORE_SECONDS; its note has the rows per
  chunk and the largest worker's process memory seen during the call; it checks that
  the class counts add up to every row. One process and one worker are not run (one
  process would hold every row's hidden layer, 4 GiB).

The dask modes start their clusters (threads_per_worker=1) when a case first needs
them and keep them for the cases after it that run on the same ones; before a case's
modes are built, every other cluster is closed (`_retire`: idle clusters cost the
timed ones CPU on two cores). They time `client.compute` of the lazy outputs end to
end. Their peak memory is the largest worker's resident set after a call (what "memory per worker" means here), not
this process's. Run with ``graphc bench --only scale`` (not in the default run: it
starts clusters and writes a file of N rows).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
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
STEP_OVERHEAD_CASE = "step B=64"  # issue 31: what a DataParallelStep step costs besides its work
STEP_LARGE_CASE = "step 256-512-10 B=4096"  # issue 31: two workers against one process
LARGE_MLP = (256, 512, 10)
OVERHEAD_CASE = f"overhead {OVERHEAD_CHUNKS} chunks x {OVERHEAD_ROWS} rows"
OUT_OF_CORE = "out of core 1 GiB, 200 MB workers"  # issue 31: chunks="auto"
OUT_OF_CORE_LIMIT = "200MB"  # per worker
OUT_OF_CORE_SECONDS = 600.0  # a call not finished by then has stalled

# the running clusters by what they are for: ("infer", workers, queuing, memory_limit)
# or ("train", workers); (cluster, client)
_clusters: dict[tuple, tuple[Any, Any]] = {}


def _case_clusters(params: dict[str, Any]) -> set[tuple]:
    """The clusters a case's dask modes run on: one per worker count."""
    if params["kind"] == "step":
        return {("train", n) for n in WORKERS.values()}
    queuing, limit = params.get("queuing", True), params.get("memory_limit")
    return {("infer", n, queuing, limit) for n in WORKERS.values()}


def _retire(keep: set[tuple]) -> None:
    """Close every cluster but those in `keep`. An idle cluster is not free: its
    workers' heartbeats and memory monitors, and its scheduler in this process, took
    about 14 % of a core with four clusters up, and on two cores that lands in the
    steps being timed (the 256-512-10 step on two workers, its other modes' clusters up
    and idle: 31 ms, against 24 ms with only its own)."""
    for key in [k for k in _clusters if k not in keep]:
        _close(key)


atexit.register(_retire, set())  # every cluster still up closes at exit


def _distributed() -> tuple[Any, Any, Any]:
    """dask, and dask.distributed's Client and LocalCluster (UnavailableError without)."""
    try:
        import dask
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise UnavailableError(
            f'dask is not installed ({exc}): pip install "graphc[dask]"'
        ) from None
    return dask, Client, LocalCluster


def _keep(key: tuple, cluster: Any, c: Any) -> Any:
    """Register a started cluster and its client under `key` (closed at exit)."""
    _clusters[key] = cluster, c
    return c


def client(workers: int, queuing: bool = True, memory_limit: str | None = None) -> Any:
    """A Client of a LocalCluster of `workers` processes, started when first needed;
    `queuing=False` starts its scheduler with root-task queuing off; `memory_limit` per
    worker (dask's default when None)."""
    key = ("infer", workers, queuing, memory_limit)
    if key in _clusters:
        return _clusters[key][1]
    dask, client_type, cluster_type = _distributed()
    settings = {} if queuing else {"distributed.scheduler.worker-saturation": float("inf")}
    limit = {} if memory_limit is None else {"memory_limit": memory_limit}
    with dask.config.set(settings):
        cluster = cluster_type(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0", **limit
        )
    return _keep(key, cluster, client_type(cluster, set_as_default=False))


def _close(key: tuple) -> None:
    cluster, c = _clusters.pop(key, (None, None))
    if c is not None:
        c.close()
        cluster.close()


TRAINING_NOTE = "workers without MALLOC_TRIM_THRESHOLD_; client direct_to_workers"
TRIM = "MALLOC_TRIM_THRESHOLD_"
_USERS_TRIM = os.environ.get(TRIM)  # before any nanny of this process has set it


def training_client(workers: int) -> Any:
    """The training cases' Client: direct_to_workers (the replicas' actor calls go
    straight to the workers, not through the scheduler), of a LocalCluster whose workers
    keep glibc's allocator defaults. dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 in
    its workers, which hands every freed buffer of 64 KiB or more back to the OS, so a
    step's buffers are faulted in again every step (256-512-10 MLP, one thread: a
    half-batch chunk 17.4 -> 19.9 ms, the update 0.5 -> 2.2 ms); one process keeps them.
    Unsetting dask's config is not enough: a nanny puts its variables into this
    process's own environment before it spawns a worker, and leaves them there, so the
    workers of every later cluster inherit the threshold (the 256-512-10 step on two
    workers after the out-of-core case: 28 ms, against 24 ms). So the variable is
    removed while these workers start, unless the user had set it. Started when first
    needed, as `client`."""
    key = ("train", workers)
    if key in _clusters:
        return _clusters[key][1]
    dask, client_type, cluster_type = _distributed()
    unset = {f"distributed.nanny.pre-spawn-environ.{TRIM}": None}
    inherited = os.environ.pop(TRIM, None) if _USERS_TRIM is None else None
    try:
        with dask.config.set(unset):
            cluster = cluster_type(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
    finally:
        if inherited is not None:
            os.environ[TRIM] = inherited
    return _keep(key, cluster, client_type(cluster, set_as_default=False, direct_to_workers=True))


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


def read_block(template: np.ndarray, path: str, block_info: dict | None = None) -> np.ndarray:
    """The rows of the file where `template`'s block lies (a map_blocks function)."""
    (start, stop), _ = block_info[None]["array-location"]
    return read_rows(path, start, stop)


def _inputs(params: dict[str, Any]) -> dict[str, Any]:
    rows, chunk = params["rows"], params["chunk"]
    if params["kind"] == "step":
        rng = np.random.default_rng(0)
        features, hidden, classes = params.get("mlp", (FEATURES, HIDDEN, CLASSES))
        x = rng.standard_normal((rows, features), dtype=np.float32)
        return {"x": x, "y": rng.integers(0, classes, rows), "mlp": (features, hidden, classes)}
    path = Path(tempfile.mkdtemp(prefix="graphc_scale_")) / "rows.npy"
    atexit.register(shutil.rmtree, path.parent, True)  # up to a few GB each
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
        _retire(_case_clusters(params))  # only this case's clusters run while it is timed
        if params["kind"] == "step":
            from graphc.distributed import DataParallelStep

            c = training_client(WORKERS[mode])
            parallel = DataParallelStep(_train_step(inputs), c, chunks=WORKERS[mode])
            return Prepared(
                lambda: parallel.step(inputs["x"], inputs["y"]),
                resident_bytes=worker_bytes(c),
                note=TRAINING_NOTE,
            )
        limit = params.get("memory_limit")
        c = client(WORKERS[mode], queuing=params.get("queuing", True), memory_limit=limit)
        if limit is not None:
            return _out_of_core(c, params, inputs)
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


def _out_of_core(c: Any, params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    """map_batches with chunks="auto" over the file on memory-limited workers: one call."""
    import dask.array as da

    from graphc.distributed import map_batches

    rows, block = params["rows"], params["chunk"]
    template = da.zeros((rows, FEATURES), chunks=(block, FEATURES), dtype=np.float32)
    x = template.map_blocks(read_block, inputs["path"], dtype=np.float32)
    with c.as_current():  # chunks="auto" reads this client's workers' memory limits
        lazy = map_batches(
            scoring_graph(), x, **inputs["weights"], backend="numpy", chunks=params["chunks"]
        )
    graph = lazy[0].__dask_graph__()
    tasks = sum(isinstance(k, tuple) and str(k[0]).startswith("mlp_scoring_chunk-") for k in graph)
    limit = max(w["memory_limit"] for w in c.scheduler_info()["workers"].values())

    def call() -> Any:
        futures = c.compute(list(lazy))
        start, peak = time.perf_counter(), 0
        while not all(f.done() for f in futures):  # a paused worker would wait forever
            workers = c.scheduler_info()["workers"].values()
            peak = max([peak] + [w["metrics"]["memory"] for w in workers])
            if time.perf_counter() - start > OUT_OF_CORE_SECONDS:
                c.cancel(futures)
                raise TimeoutError(f"not finished in {OUT_OF_CORE_SECONDS:.0f} s: stalled")
            time.sleep(0.25)
        mean_probs, counts = c.gather(futures)
        if int(counts.sum()) != rows:
            raise ValueError(f"the class counts add up to {int(counts.sum())} rows, not {rows}")
        # the runner reads the note after this first call: the memory seen during it
        prepared.note = (
            f"chunks='auto': {tasks} chunks ({rows / tasks:,.0f} rows on average); largest "
            f"worker's process memory seen during the call {peak / 2**20:.0f} MiB of "
            f"{limit / 2**20:.0f} MiB"
        )
        return mean_probs, counts

    # one call, timed once (single_shot); no second call for the client's memory
    prepared = Prepared(call, resident_bytes=None, single_shot=True)
    return prepared


def _train_step(inputs: dict[str, Any]) -> Any:
    features, hidden, classes = inputs["mlp"]
    model = nn.Sequential(
        nn.Linear(features, hidden, generator=1), nn.ReLU(), nn.Linear(hidden, classes, generator=2)
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
        Case(STEP_OVERHEAD_CASE, {"kind": "step", "rows": 64, "chunk": 32}),
        Case(
            OUT_OF_CORE,
            {
                "kind": "infer",
                "rows": 2**23,  # x 32 float32 = 1 GiB
                "chunk": 2**16,  # rows per read
                "chunks": "auto",
                "memory_limit": OUT_OF_CORE_LIMIT,
            },
            quick=False,
            skip_modes={
                BASELINE: "one process would hold every row's hidden layer (4 GiB)",
                ONE: "the goal reads two workers",
            },
        ),
        Case(STEP_LARGE_CASE, {"kind": "step", "rows": 4096, "chunk": 2048, "mlp": LARGE_MLP}),
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
