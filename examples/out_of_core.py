"""Score an MLP over an on-disk array larger than the workers' memory, with dask.

The rows live in a float32 `np.memmap` file on disk. Each dask task reads its own
chunk of rows from the file (the array is never loaded whole, nor pickled), and
`graphc.distributed.map_batches` runs the compiled MLP over the chunks on a
LocalCluster whose workers each get `--memory-limit` bytes, less than the file. The
graph's outputs that keep the batch (each row's predicted class) are written to disk
chunk by chunk; those that reduce it (the mean class probabilities, the largest
logit, how many rows each class got, the log-sum-exp of the scores) are combined from
per-chunk partials by graphc's batch split. On a terminal, a progress bar follows
the tasks.

    python examples/out_of_core.py --rows 4000000 --memory-limit 300MiB

The file (512 MiB at 4,000,000 rows) and the classes go under --out, by default
out/out_of_core/ at the repository's root, a folder git ignores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import graphc as gc

FEATURES, HIDDEN, CLASSES = 32, 128, 10
# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = Path(__file__).resolve().parents[1] / "out" / "out_of_core"


def write_rows(path: Path, rows: int, chunk: int, seed: int) -> np.memmap:
    """A (rows, FEATURES) float32 file, written a chunk at a time."""
    data = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, FEATURES))
    for start in range(0, rows, chunk):
        stop = min(rows, start + chunk)
        data[start:stop] = np.random.default_rng([seed, start]).standard_normal(
            (stop - start, FEATURES), dtype=np.float32
        )
    data.flush()
    return data


def read_rows(path: str, start: int, stop: int) -> np.ndarray:
    """One chunk of rows, read on the worker (a copy: the task owns its memory)."""
    return np.array(np.load(path, mmap_mode="r")[start:stop])


def on_disk(path: Path, rows: int, chunk: int) -> Any:
    """The file as a dask array whose tasks each read their chunk."""
    import dask
    import dask.array as da

    read = dask.delayed(read_rows, pure=True)
    blocks = [
        da.from_delayed(
            read(str(path), s, min(rows, s + chunk)),
            (min(rows, s + chunk) - s, FEATURES),
            np.float32,
        )
        for s in range(0, rows, chunk)
    ]
    return da.concatenate(blocks, axis=0)


def save_block(block: np.ndarray, folder: str, block_info: dict | None = None) -> np.ndarray:
    """Write one chunk of per-row results to its own file; give back its row count."""
    (index,) = block_info[None]["chunk-location"]
    np.save(Path(folder) / f"{index:06d}.npy", block)
    return np.array([len(block)])


def mlp_graph() -> gc.Graph:
    g = gc.Graph("mlp_scores")
    with g:
        x = gc.placeholder("x", shape=("B", FEATURES))
        w1 = gc.placeholder("w1", shape=(FEATURES, HIDDEN))
        b1 = gc.placeholder("b1", shape=(HIDDEN,))
        w2 = gc.placeholder("w2", shape=(HIDDEN, CLASSES))
        logits = gc.relu(x @ w1 + b1) @ w2
        probs = gc.softmax(logits, axis=-1)
        predicted = gc.argmax(logits, axis=-1)
        gc.output(predicted, name="predicted")
        gc.output(gc.mean(probs, axis=0), name="mean_probs")
        gc.output(gc.max(logits), name="max_logit")
        gc.output(gc.sum(gc.one_hot(predicted, CLASSES), axis=0), name="class_counts")
        gc.output(gc.logsumexp(gc.max(logits, axis=-1)), name="logsumexp_best")
    return g


def weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)).astype(np.float32),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows",
        type=int,
        default=4_000_000,
        help="rows of the on-disk array (default: %(default)s)",
    )
    parser.add_argument(
        "--chunk", type=int, default=100_000, help="rows per task (default: %(default)s)"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="dask workers (default: %(default)s)"
    )
    parser.add_argument(
        "--memory-limit", default="300MiB", help="per worker (default: %(default)s)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="for the files (out/out_of_core/)")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the data and the MLP's weights (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    try:
        from dask.distributed import Client, LocalCluster, progress, wait
    except ImportError:
        sys.exit('this example needs dask: pip install "graphc[dask]"')
    from graphc.distributed import map_batches

    folder = args.out
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rows.npy"
    write_rows(path, args.rows, args.chunk, args.seed)
    size = path.stat().st_size
    print(f"{args.rows:,} rows x {FEATURES} float32 on disk: {size / 2**20:.1f} MiB at {path}")
    params = weights(args.seed)
    exe = gc.compile(mlp_graph())
    with (
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            memory_limit=args.memory_limit,
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        limit = next(iter(client.scheduler_info()["workers"].values()))["memory_limit"]
        print(f"{args.workers} workers, {limit / 2**20:.0f} MiB each")
        x = on_disk(path, args.rows, args.chunk)
        predicted, *summaries = map_batches(exe, x, **params)
        # each row's class goes to disk chunk by chunk; the summaries come back here
        (folder / "predicted").mkdir(exist_ok=True)
        written = predicted.map_blocks(
            save_block, str(folder / "predicted"), chunks=(1,), dtype=np.int64
        ).sum()
        start = time.perf_counter()
        futures = client.compute([written, *summaries])
        if sys.stdout.isatty():  # redrawn in place there; in a log, one long line
            progress(futures)
            print()
        else:
            wait(futures)
        rows, mean_probs, max_logit, counts, lse = client.gather(futures)
        seconds = time.perf_counter() - start
    print(
        f"scored in {seconds:.2f} s ({args.rows / seconds:,.0f} rows/s); {rows:,} classes written"
    )
    print("mean class probabilities:", np.round(mean_probs, 4))
    print("rows per predicted class:", counts.astype(np.int64))
    print(f"largest logit {float(max_logit):.4f}, logsumexp of the best logits {float(lse):.4f}")
    return {
        "path": path,
        "predicted_dir": folder / "predicted",
        "mean_probs": mean_probs,
        "max_logit": max_logit,
        "class_counts": counts,
        "logsumexp_best": lse,
        "params": params,
        "bytes": size,
        "memory_limit": limit,
    }


if __name__ == "__main__":
    main()
