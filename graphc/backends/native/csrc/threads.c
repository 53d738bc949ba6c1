#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <pthread.h>
#include <omp.h>

typedef void (*graphc_dojob)(int thread, void *job, int extra);
typedef void (*graphc_setter)(void *callback);

struct graphc_job { graphc_dojob dojob; char *job; int index, extra; };

static void *graphc_job_thread(void *arg) {
    struct graphc_job *job = arg;
    job->dojob(job->index, job->job, job->extra);
    return NULL;
}

/* every job on a thread of its own, job 0 on the caller's */
static void graphc_jobs_on_threads(graphc_dojob dojob, int n, char *jobs, size_t size, int extra) {
    pthread_t ids[n];
    struct graphc_job args[n];
    int made[n];
    for (int i = 1; i < n; i++) {
        args[i] = (struct graphc_job){dojob, jobs + (size_t)i * size, i, extra};
        made[i] = pthread_create(&ids[i], NULL, graphc_job_thread, &args[i]) == 0;
    }
    dojob(0, jobs, extra);
    for (int i = 1; i < n; i++) {
        if (made[i]) pthread_join(ids[i], NULL);
        else dojob(i, jobs + (size_t)i * size, extra);  /* no thread to be had */
    }
}

static long graphc_blas_count;  /* calls OpenBLAS made (graphc_blas_calls, for the tests) */

/* the pool's clock (cexpr.PRELUDE's gc_pool_clock): a product's jobs on the pool warm it */
static int64_t *graphc_pool_clock;
void graphc_bind_pool_clock(int64_t *clock) { graphc_pool_clock = clock; }

long graphc_blas_calls(void) { return __atomic_load_n(&graphc_blas_count, __ATOMIC_RELAXED); }

/* OpenBLAS's threads callback: run jobs 0..n-1, concurrently, and return when all are
   done (sync is always honoured) */
void graphc_blas_jobs(int sync, graphc_dojob dojob, int n, size_t size, void *jobs, int extra) {
    (void)sync;
    __atomic_add_fetch(&graphc_blas_count, 1, __ATOMIC_RELAXED);
    if (n <= 1) {
        if (n == 1) dojob(0, jobs, extra);
        return;
    }
    int formed = 0;
    if (!omp_in_parallel()) {
        #pragma omp parallel num_threads(n)
        if (omp_get_num_threads() == n) {
            int i = omp_get_thread_num();
            if (i == 0) formed = 1;
            dojob(i, (char *)jobs + (size_t)i * size, extra);
        }
    }
    if (!formed) graphc_jobs_on_threads(dojob, n, (char *)jobs, size, extra);
    else if (graphc_pool_clock) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        __atomic_store_n(graphc_pool_clock, (int64_t)t.tv_sec * 1000000000 + t.tv_nsec,
                         __ATOMIC_RELAXED);
    }
}

static graphc_setter graphc_blas_setter;

static void graphc_blas_child(void) {
    if (graphc_blas_setter) graphc_blas_setter(NULL);
}

/* register the callback with OpenBLAS's setter, and take it back in a forked child */
void graphc_blas_install(void *setter) {
    static int registered;
    graphc_blas_setter = (graphc_setter)setter;
    if (!registered) registered = pthread_atfork(NULL, NULL, graphc_blas_child) == 0;
    graphc_blas_setter((void *)graphc_blas_jobs);
}

/* CPython's C API, as pointers from threads.py (this library links no libpython) */
struct graphc_python {
    void *(*interpreter)(void);       /* PyInterpreterState_Get */
    void *(*thread_head)(void *);     /* PyInterpreterState_ThreadHead */
    void *(*thread_next)(void *);     /* PyThreadState_Next */
    void *(*current)(void);           /* PyThreadState_Get */
    void *(*frame)(void *);           /* PyThreadState_GetFrame: a new reference or NULL */
    void *(*code)(void *);            /* PyFrame_GetCode: a new reference */
    void (*decref)(void *);           /* Py_DecRef */
};

/* Register the callback, as graphc_blas_install, if every other Python thread of this
   interpreter waits in one of the `n` code objects `quiet` (its innermost frame's), or
   runs no Python; returns whether it did. Called with the GIL held and the collector
   off (threads.py), so no other thread runs Python, and none can start a product, from
   the check to the registration. */
int graphc_blas_install_if_quiet(void *setter, const struct graphc_python *py,
                                 void *const *quiet, int n) {
    void *me = py->current();
    for (void *t = py->thread_head(py->interpreter()); t; t = py->thread_next(t)) {
        if (t == me) continue;
        void *frame = py->frame(t);
        if (!frame) continue;
        void *code = py->code(frame);
        int waits = 0;
        for (int i = 0; i < n && !waits; i++) waits = code == quiet[i];
        py->decref(code);
        py->decref(frame);
        if (!waits) return 0;
    }
    graphc_blas_install(setter);
    return 1;
}
