"""One thread pool: numpy's OpenBLAS runs its jobs on graphc's OpenMP threads
(graphc/backends/native/threads.py).

A native plan installs the callback; products keep OpenBLAS's bits; the callback runs
every job concurrently, on an OpenMP team or, inside an active OpenMP region, on
threads of its own (the jobs of one product wait on each other, so running them one
after another would hang); concurrent callers; a forked child gets OpenBLAS's own pool
back; GRAPHC_BLAS_POOL=openblas opts out, and then idle OpenMP workers sleep.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import graphc as gc
from graphc.backends.native import blas, threads, toolchain
from tests.native_checks import needs_native

pytestmark = needs_native


def _pool_installed() -> None:
    """Compile and call a native plan, which joins the pool (this test process has no
    other thread); skip where OpenBLAS has no threads callback (numpy 2.0's wheels
    bundle OpenBLAS 0.3.27)."""
    g = gc.trace(lambda x: gc.tanh(x) * 2.0, gc.TensorSpec(("B",)))
    gc.compile(g, backend="native")(np.zeros(4, np.float32))
    if not threads.install().startswith("one pool"):
        pytest.skip(f"no pool here: {threads.install()}")
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    assert threads.pool() == "joined", f"not joined ({threads.pool()}); other threads: {others}"


def _threaded_product() -> np.ndarray:
    """A product OpenBLAS splits between threads (m n k above 2**18)."""
    a = np.arange(96 * 160, dtype=np.float32).reshape(96, 160) % 7
    return a @ a.T[:, :128]


def _setter():
    found = threads._setter()
    assert not isinstance(found, str), found
    return found[0]


def test_a_native_plan_installs_the_callback_and_says_so() -> None:
    _pool_installed()
    before = threads.calls()
    _threaded_product()
    assert threads.calls() > before  # OpenBLAS handed its jobs to graphc's callback
    g = gc.trace(lambda x: gc.exp(x) + 1.0, gc.TensorSpec(("B",)))
    text = gc.compile(g, backend="native").explain(np.zeros(3, np.float32))
    assert "one pool: " in text and blas.library().path.name in text


PRODUCTS = [
    ((64, 784), (784, 256), False, False),
    ((64, 784), (256, 784), False, True),  # a Linear layer's x @ W.T
    ((784, 64), (784, 256), True, False),  # a weight gradient's dY.T @ X
    ((3, 2000), (2000, 300), False, False),  # few rows, long K
    ((500, 600), (600, 7), False, False),  # few columns
    ((256, 256), (256, 256), False, False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa,sb,ta,tb", PRODUCTS)
def test_products_on_the_pool_keep_openblas_bits(dtype, sa, sb, ta, tb) -> None:
    _pool_installed()
    rng = np.random.default_rng(sa[0] * sb[1])
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    a[0, 0], b[-1, -1] = -0.0, 1e-40 if dtype == np.float32 else 1e-310  # -0.0, subnormal
    x, y = (a.T if ta else a), (b.T if tb else b)
    stacked = np.stack([x, x[::-1]])
    pooled = (x @ y, stacked @ y, np.dot(x, y))
    setter = _setter()
    setter(None)  # OpenBLAS's own threads
    try:
        before = threads.calls()
        own = (x @ y, stacked @ y, np.dot(x, y))
        assert threads.calls() == before
    finally:
        toolchain.build(threads.SOURCE).library.graphc_blas_install(
            ctypes.cast(setter, ctypes.c_void_p)
        )
    before = threads.calls()
    _threaded_product()
    assert threads.calls() > before
    for got, want in zip(pooled, own, strict=True):
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))


JOBS = r"""
#include <stddef.h>
#include <time.h>
#include <omp.h>

typedef void (*dojob_fn)(int, void *, int);
typedef void (*callback_fn)(int, dojob_fn, int, size_t, void *, int);

static volatile int arrived;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* a job that waits for all n jobs to have started (as OpenBLAS's wait for each other's
   panels), for at most 5 s; it writes 1 if they all came, -1 if not */
static void job(int thread, void *data, int n) {
    (void)thread;
    __atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
    double start = now();
    while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < n && now() - start < 5.0) {}
    ((int *)data)[0] = __atomic_load_n(&arrived, __ATOMIC_SEQ_CST) >= n ? 1 : -1;
}

/* run n jobs through the callback, from an active OpenMP region when nested; the
   number of jobs that saw all the others */
int graphc_test_jobs(void *callback, int n, int nested) {
    int flags[64][16] = {{0}};  /* one job's data: 64 bytes apart */
    arrived = 0;
    if (nested) {
        #pragma omp parallel num_threads(2)
        {
            #pragma omp master
            ((callback_fn)callback)(1, job, n, sizeof flags[0], flags, n);
        }
    } else {
        ((callback_fn)callback)(1, job, n, sizeof flags[0], flags, n);
    }
    int ok = 0;
    for (int i = 0; i < n; i++) ok += flags[i][0] == 1;
    return ok;
}
"""


@pytest.mark.parametrize("n", [0, 1, 2, 3, 8])
@pytest.mark.parametrize("nested", [False, True])
def test_the_callback_runs_all_jobs_at_once(n, nested) -> None:
    support = toolchain.build(threads.SOURCE).library
    runner = toolchain.build(JOBS).library
    runner.graphc_test_jobs.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    callback = ctypes.cast(support.graphc_blas_jobs, ctypes.c_void_p)
    assert runner.graphc_test_jobs(callback, n, int(nested)) == n


def test_products_from_several_python_threads_at_once() -> None:
    _pool_installed()
    rng = np.random.default_rng(1)
    pairs = [
        (
            rng.standard_normal((96, 300)).astype(np.float32),
            rng.standard_normal((300, 200)).astype(np.float32),
        )
        for _ in range(4)
    ]
    want = [a @ b for a, b in pairs]
    got: dict[int, list[np.ndarray]] = {}

    def work(i: int) -> None:
        got[i] = [pairs[i][0] @ pairs[i][1] for _ in range(30)]

    workers = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert not any(w.is_alive() for w in workers)
    for i in range(4):
        assert all(np.array_equal(r, want[i]) for r in got[i])


def _child(queue) -> None:
    before = threads.calls()
    a = np.ones((128, 300), np.float32)
    product = a @ a.T  # on OpenBLAS's own threads again
    queue.put((threads.calls() - before, float(product[0, 0])))


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's, when other tests loaded it
@pytest.mark.filterwarnings("ignore:This process:DeprecationWarning")  # CPython 3.12+: threads
def test_a_forked_child_gets_openblas_own_threads_back() -> None:
    _pool_installed()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == (0, 300.0)  # the child's products left the callback alone
    before = threads.calls()
    _threaded_product()
    assert threads.calls() > before  # the parent keeps its pool


PROBE = textwrap.dedent(
    """
    import os, numpy as np, graphc as gc
    from graphc.backends.native import threads
    g = gc.trace(lambda x: gc.tanh(x), gc.TensorSpec(("B",)))
    exe = gc.compile(g, backend="native")
    exe(np.zeros(3, np.float32))
    print(threads.install().startswith("one pool"), os.environ.get("OMP_WAIT_POLICY"),
          os.environ.get("GOMP_SPINCOUNT"), "keeps its own" in exe.explain(np.zeros(3, np.float32)))
    """
)


@pytest.mark.parametrize(
    "env,with_callback,without",
    [
        ({}, f"True None {threads.SPIN_COUNT} False", "False PASSIVE None True"),
        ({"GRAPHC_BLAS_POOL": "openblas"}, "False PASSIVE None True", "False PASSIVE None True"),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, "True ACTIVE None False", "False ACTIVE None True"),
        ({"GOMP_SPINCOUNT": "7"}, "True None 7 False", "False None 7 True"),  # the user's choice
    ],
)
def test_the_pool_in_a_fresh_process(env, with_callback, without) -> None:
    """Where OpenBLAS has a threads callback: one pool, workers that spin briefly; where it
    has none (numpy 2.0's OpenBLAS 0.3.27): its own pool, and workers that sleep."""
    callback = not isinstance(threads._setter(), str)
    drop = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "GRAPHC_BLAS_POOL")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (with_callback if callback else without)


# -- joining the pool only while no product can be under way ---------------------------------

BUSY_THREAD = textwrap.dedent(
    """
    import threading, numpy as np, graphc as gc
    from graphc.backends.native import threads
    a = np.random.default_rng(0).standard_normal((256, 256))
    want = a @ a
    x = np.zeros(3, np.float32)
    exe = gc.compile(gc.trace(gc.tanh, gc.TensorSpec(("B",))), backend="native")
    stop, started = threading.Event(), threading.Event()
    wrong = []

    def multiply():  # threaded products until told to stop
        started.set()
        while not stop.is_set():
            wrong.append(not np.array_equal(a @ a, want))

    other = threading.Thread(target=multiply)
    other.start()
    started.wait()
    exe(x)  # the plan's first call: the other thread may be inside OpenBLAS
    exe.wait()
    first = threads.pool()
    stop.set()
    other.join()
    gc.compile(gc.trace(gc.exp, gc.TensorSpec(("B",))), backend="native")(x)
    print(first, threads.pool(), sum(wrong), len(wrong) > 0)
    """
)

WAITING_THREADS = textwrap.dedent(
    """
    import asyncio, queue, threading, concurrent.futures
    import numpy as np, graphc as gc
    from graphc.backends.native import threads
    stop, items = threading.Event(), queue.Queue()
    waiting = [threading.Thread(target=stop.wait), threading.Thread(target=items.get)]
    loop = asyncio.new_event_loop()  # a selector's select, as a notebook's loops wait
    waiting.append(threading.Thread(target=loop.run_forever))
    waiting.append(threading.Thread(target=waiting[0].join))  # a join
    for thread in waiting:
        thread.start()
    pool = concurrent.futures.ThreadPoolExecutor(1)  # an idle worker
    pool.submit(int).result()
    a = np.random.default_rng(0).standard_normal((256, 256))
    want = a @ a  # on OpenBLAS's own threads
    x = np.zeros(3, np.float32)
    exe = gc.compile(gc.trace(gc.tanh, gc.TensorSpec(("B",))), backend="native")
    exe(x)
    exe.wait()
    right = np.array_equal(a @ a, want)
    stop.set()
    items.put(None)
    loop.call_soon_threadsafe(loop.stop)
    for thread in waiting:
        thread.join()
    pool.shutdown()
    print(threads.pool(), threads.calls() > 0, right)
    """
)

WHILE_BUILDING = textwrap.dedent(
    """
    import numpy as np, graphc as gc
    from graphc.backends.native import threads
    from graphc.runtime import tiers
    a = np.random.default_rng(0).standard_normal((256, 256))
    want = a @ a
    exe = gc.compile(gc.trace(lambda x: gc.exp(x) * 2.0, gc.TensorSpec((1000,), "float32")))
    x = np.ones(1000, np.float32)
    exe(x)  # the numpy tier; the native kernels build in the background meanwhile
    wrong = products = 0
    while tiers.pending() or products < 200:  # threaded products all through the build
        wrong += not np.array_equal(a @ a, want)
        products += 1
    exe.wait()
    exe(x)  # the native tier's first call here: the pool is joined now
    wrong += not np.array_equal(a @ a, want)
    print(wrong, threads.pool())
    """
)


def _run_child(script: str, cache: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "GRAPHC_BACKEND"}  # the default: auto
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            env={**env, "GRAPHC_CACHE_DIR": cache},
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the child hung (a product waiting for a job no thread takes)")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow  # child interpreters building native kernels: several seconds
def test_the_pool_is_joined_only_while_no_other_thread_runs(tmp_path) -> None:
    """OpenBLAS swapped its threading under a product in flight gives a wrong product or
    a hang: the tier builder registered the callback while the program's own thread
    multiplied (a fresh install: 2 wrong and 2 hung runs in 9). Now a plan's thread
    registers it, before the plan's first call there, and only when no other thread can
    be inside OpenBLAS."""
    if isinstance(threads._setter(), str):
        pytest.skip(f"no pool here: {threads._setter()}")
    assert _run_child(BUSY_THREAD, str(tmp_path / "one")) == "ready joined 0 True"
    assert _run_child(WHILE_BUILDING, str(tmp_path / "two")) == "0 joined"


@pytest.mark.slow  # a child interpreter building native kernels
def test_the_pool_is_joined_while_every_other_thread_waits(tmp_path) -> None:
    """A thread waiting on an Event, a Queue, a join, a selector or as an idle pool
    worker cannot be inside OpenBLAS, and cannot leave its wait while the C call that
    checks and registers holds the GIL: the pool is joined (torch.compile leaves two
    such threads, which kept the native transformer step off the pool: 27 ms, against
    8 ms joined), and the product's bits are OpenBLAS's own pool's."""
    if isinstance(threads._setter(), str):
        pytest.skip(f"no pool here: {threads._setter()}")
    assert _run_child(WAITING_THREADS, str(tmp_path)) == "joined True True"


KERNEL_LIKE_THREADS = textwrap.dedent(
    """
    import sys, threading, time, types
    import numpy as np, graphc as gc
    from graphc.backends.native import threads
    # a Jupyter kernel's waiting frames, by the names ipykernel gives them, in modules
    # made here (the test does not need ipykernel)
    stop = threading.Event()

    class ParentPollerUnix:
        def run(self):
            while not stop.is_set():
                time.sleep(0.01)

    module = types.ModuleType("ipykernel.parentpoller")
    module.ParentPollerUnix = ParentPollerUnix
    sys.modules["ipykernel.parentpoller"] = module
    poller = threading.Thread(target=ParentPollerUnix().run)
    poller.start()
    x = np.zeros(3, np.float32)
    exe = gc.compile(gc.trace(gc.tanh, gc.TensorSpec(("B",))), backend="native")
    exe(x)
    exe.wait()
    stop.set()
    poller.join()
    print(threads.pool())
    """
)


@pytest.mark.slow  # a child interpreter building native kernels
def test_a_jupyter_kernels_waiting_threads_let_the_pool_join(tmp_path) -> None:
    """ipykernel's threads wait in frames of their own (zmq's device, os.read in the
    output watchers, time.sleep in the parent poller): taken for busy, they kept every
    notebook's OpenBLAS off the pool. A thread sleeping in ParentPollerUnix.run now
    counts as waiting; the same loop under another name does not (the pool stays
    "ready", as with any thread that may be in a product)."""
    if isinstance(threads._setter(), str):
        pytest.skip(f"no pool here: {threads._setter()}")
    assert _run_child(KERNEL_LIKE_THREADS, str(tmp_path / "one")) == "joined"
    renamed = KERNEL_LIKE_THREADS.replace('"ipykernel.parentpoller"', '"not_a_kernel"')
    assert _run_child(renamed, str(tmp_path / "two")) == "ready"


@pytest.mark.slow  # starts a Jupyter kernel
def test_in_a_jupyter_kernel_the_pool_joins(tmp_path) -> None:
    """A real ipykernel kernel (where installed): after a native plan's calls, numpy's
    OpenBLAS runs on graphc's pool."""
    pytest.importorskip("ipykernel")
    manager = pytest.importorskip("jupyter_client.manager")
    if isinstance(threads._setter(), str):
        pytest.skip(f"no pool here: {threads._setter()}")
    code = textwrap.dedent(
        """
        import numpy as np, graphc as gc
        from graphc.backends.native import threads
        x = np.ones((64, 64), np.float32)
        exe = gc.compile(gc.trace(lambda a: gc.tanh(a @ a), x), backend="native", wait=True)
        exe(x)
        print("pool", threads.pool())
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "GRAPHC_BACKEND"}
    km, kc = manager.start_new_kernel(env={**env, "GRAPHC_CACHE_DIR": str(tmp_path)})
    printed: list[str] = []
    try:
        reply = kc.execute_interactive(
            code,
            timeout=240,
            output_hook=lambda m: (
                printed.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None
            ),
        )
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert reply["content"]["status"] == "ok", reply["content"]
    assert "pool joined" in "".join(printed), printed
