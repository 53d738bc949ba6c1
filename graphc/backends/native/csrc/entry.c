/* An executable's entry in C: a small plan's whole run as one call (native/entry.py).

   A CPython extension module, `_graphc_entry`, built once per interpreter and numpy
   (not per graph). Its one type, Entry, is called with an executable's positional
   data feeds. When every feed is an exact numpy array of the dtype, shape and layout
   (C-ordered, aligned, native byte order) the entry was made for, it allocates the
   outputs, points the tape's slots at the feeds and the outputs, and replays the tape:
   the kernel calls one run of the plan's native code makes, recorded once
   (loops.py, csrc/loop.c's gc_tape_once). Any other call goes to `fallback`, the
   executable's Python entry, unchanged: it checks, converts or raises as before.

   The tape's buffers (its arguments and slots, the plan's arena) are one set per
   entry. A small plan's tape runs with the GIL held from the slots' filling to the
   tape's end, so calls from several threads take turns; no Python code runs in between
   (the outputs are allocated before any slot is written, as an allocation may run the
   collector). An entry given a lock (`acquire` and `release`, a threading.Lock's bound
   methods) takes it without waiting before it writes a slot and gives it back after
   the tape (after a failing call's error is raised): a plan holding state shares its
   executable's lock with the Python entry, and a large plan releases the GIL through
   its tape (`nogil`), so other threads run meanwhile; so does a plan whose tape may
   call `failed` to finish a call's work mid-tape (Kernel.repairs: Python code then runs,
   and the tape goes on from the next call). A call that finds the lock taken goes to
   `fallback`, which waits for it (state) or runs on its own thread's arena.

   The outputs `recycled` marks (runtime/recycle.py's rule, applied by entry.py) are
   recycled as the Python entry's are: the entry keeps the array it returned last from
   each such slot and hands it out again when its own reference is the only one left
   (the caller, a view and a container each hold one), so a large output is not a fresh
   mmap whose pages fault in on every call (GELU over 1e7 floats on a Zen 4: 365 page
   faults a call, 6.3 ms against 1.9 recycled). Such an output starts on a cache line,
   its memory a byte array's (its base), and is handed out again only when that byte
   array has no other holder either: numpy points a view of the output at its base. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t (*gc_tape_fn)(const int64_t *tape, int64_t *args, const int64_t *slots,
                              int64_t start);

#define GC_ENTRY_MAX_ARRAYS 256

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fallback; /* the executable's Python entry: every other call */
    PyObject *failed;   /* called with a failing call's index in the tape: raises */
    PyObject *keep;     /* owns the memory the addresses below point into */
    PyObject *acquire;  /* the lock's acquire and release, or NULL: no lock */
    PyObject *release;
    int nogil;          /* release the GIL through the tape (taken under the lock) */
    gc_tape_fn run;
    const int64_t *tape;
    int64_t *args;
    int64_t *slots;   /* the feeds' then the outputs' data addresses */
    const int64_t *specs; /* per feed, then per output: typenum, ndim, the dims */
    Py_ssize_t nin, nout;
    int returns; /* 0: None, 1: the one output, 2: a tuple of the outputs */
    char recycled[GC_ENTRY_MAX_ARRAYS]; /* per output: recycled, so on a cache line */
    PyObject *last[GC_ENTRY_MAX_ARRAYS]; /* per output: the array kept to recycle, or NULL */
} Entry;

static int entry_traverse(Entry *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback);
    Py_VISIT(self->failed);
    Py_VISIT(self->keep);
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    for (Py_ssize_t j = 0; j < self->nout; j++) Py_VISIT(self->last[j]);
    return 0;
}

static int entry_clear(Entry *self) {
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->keep);
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    for (Py_ssize_t j = 0; j < self->nout; j++) Py_CLEAR(self->last[j]);
    return 0;
}

static void entry_dealloc(Entry *self) {
    PyObject_GC_UnTrack(self);
    entry_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether `o` is an exact ndarray as `spec` describes, laid out as the tape was
   recorded for (C order, aligned, native byte order). */
static int matches(PyObject *o, const int64_t *spec) {
    if (!PyArray_CheckExact(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != spec[0] || PyArray_NDIM(a) != spec[1]) return 0;
    if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a))
        return 0;
    const npy_intp *dims = PyArray_DIMS(a);
    for (int64_t k = 0; k < spec[1]; k++)
        if (dims[k] != spec[2 + k]) return 0;
    return 1;
}

/* A fresh array as `spec` describes, C-ordered, starting on a cache line (64 bytes):
   a view into a byte array 64 bytes longer, its base. Kernels store whole vectors into
   it with none straddling two lines (runtime/recycle.py, as the Python entry's). */
static PyObject *line_aligned_new(const int64_t *spec) {
    PyArray_Descr *descr = PyArray_DescrFromType((int)spec[0]);
    if (descr == NULL) return NULL;
    npy_intp *dims = (npy_intp *)(spec + 2);
    npy_intp n = PyArray_MultiplyList(dims, (int)spec[1]) * PyDataType_ELSIZE(descr) + 64;
    PyObject *bytes = PyArray_SimpleNew(1, &n, NPY_UINT8);
    if (bytes == NULL) {
        Py_DECREF(descr);
        return NULL;
    }
    char *data = PyArray_DATA((PyArrayObject *)bytes);
    data += (64 - (uintptr_t)data % 64) % 64;
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, (int)spec[1], dims, NULL, data,
                                         NPY_ARRAY_CARRAY, NULL); /* takes descr */
    if (out == NULL || PyArray_SetBaseObject((PyArrayObject *)out, bytes) < 0) { /* takes bytes */
        if (out == NULL) Py_DECREF(bytes);
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

/* Whether the kept output `kept` may be handed out again: nothing but the entry holds
   it or its memory (a view holds the base), and it is still what a call returns: a
   caller may have set its shape, dtype or flags in place before letting it go. */
static int free_to_reuse(PyObject *kept, const int64_t *spec) {
    if (Py_REFCNT(kept) != 1 || !matches(kept, spec)) return 0;
    PyObject *base = PyArray_BASE((PyArrayObject *)kept);
    return base != NULL && Py_REFCNT(base) == 1 && PyArray_ISWRITEABLE((PyArrayObject *)kept);
}

/* The lock back, if the entry has one; keeps an exception already set (a failing
   call's). -1 when releasing it raised. */
static int give_back(Entry *self) {
    if (self->release == NULL) return 0;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *raised = PyErr_GetRaisedException();
    int had = raised != NULL;
#else
    PyObject *type, *raised, *traceback;
    PyErr_Fetch(&type, &raised, &traceback);
    int had = type != NULL;
#endif
    PyObject *done = PyObject_CallNoArgs(self->release);
    Py_XDECREF(done);
    if (had) { /* the first error is the one raised */
#if PY_VERSION_HEX >= 0x030C0000
        Py_XDECREF(PyErr_GetRaisedException());
        PyErr_SetRaisedException(raised);
#else
        PyErr_Clear();
        PyErr_Restore(type, raised, traceback);
#endif
        return 0;
    }
    return done == NULL ? -1 : 0;
}

static PyObject *entry_call(PyObject *callable, PyObject *const *argv, size_t nargsf,
                            PyObject *kwnames) {
    Entry *self = (Entry *)callable;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || n != self->nin) goto other;
    const int64_t *spec = self->specs;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!matches(argv[i], spec)) goto other;
        spec += 2 + spec[1];
    }
    PyObject *outs[GC_ENTRY_MAX_ARRAYS];
    for (Py_ssize_t j = 0; j < self->nout; j++) {
        PyObject *kept = self->last[j];
        int recycled = self->recycled[j];
        if (kept != NULL && free_to_reuse(kept, spec)) {
            Py_INCREF(kept);
            outs[j] = kept;
        } else {
            outs[j] = recycled ? line_aligned_new(spec)
                            : PyArray_SimpleNew((int)spec[1], (npy_intp *)(spec + 2), (int)spec[0]);
            if (outs[j] == NULL) {
                for (Py_ssize_t k = 0; k < j; k++) Py_DECREF(outs[k]);
                return NULL;
            }
            if (recycled) {
                Py_INCREF(outs[j]); /* the one it replaces is the caller's now, or freed */
                Py_XSETREF(self->last[j], outs[j]);
            }
        }
        spec += 2 + spec[1];
    }
    if (self->acquire != NULL) {
        PyObject *got = PyObject_CallOneArg(self->acquire, Py_False);
        int taken = got == Py_True;
        Py_XDECREF(got);
        if (!taken) {
            for (Py_ssize_t j = 0; j < self->nout; j++) Py_DECREF(outs[j]);
            if (got == NULL) return NULL;
            goto other;
        }
    }
    /* no Python code runs from here to the tape's end */
    for (Py_ssize_t i = 0; i < n; i++)
        self->slots[i] = (int64_t)PyArray_DATA((PyArrayObject *)argv[i]);
    for (Py_ssize_t j = 0; j < self->nout; j++)
        self->slots[n + j] = (int64_t)PyArray_DATA((PyArrayObject *)outs[j]);
    int64_t failed, start = 0;
    for (;;) {
        if (self->nogil) {
            Py_BEGIN_ALLOW_THREADS
            failed = self->run(self->tape, self->args, self->slots, start);
            Py_END_ALLOW_THREADS
        } else {
            failed = self->run(self->tape, self->args, self->slots, start);
        }
        if (!failed) break;
        /* `failed` raises the call's error, or returns when it finished the call's work
           (Kernel.repairs): the tape then goes on from the next call */
        PyObject *repaired = PyObject_CallFunction(self->failed, "L", (long long)(failed - 1));
        if (repaired != NULL) {
            Py_DECREF(repaired);
            start = failed;
            continue;
        }
        for (Py_ssize_t j = 0; j < self->nout; j++) Py_DECREF(outs[j]);
        give_back(self);
        return NULL;
    }
    if (give_back(self) < 0) {
        for (Py_ssize_t j = 0; j < self->nout; j++) Py_DECREF(outs[j]);
        return NULL;
    }
    if (self->returns == 0) {
        for (Py_ssize_t j = 0; j < self->nout; j++) Py_DECREF(outs[j]);
        Py_RETURN_NONE;
    }
    if (self->returns == 1) return outs[0];
    PyObject *result = PyTuple_New(self->nout);
    if (result == NULL) {
        for (Py_ssize_t j = 0; j < self->nout; j++) Py_DECREF(outs[j]);
        return NULL;
    }
    for (Py_ssize_t j = 0; j < self->nout; j++) PyTuple_SET_ITEM(result, j, outs[j]);
    return result;
other:
    return PyObject_Vectorcall(self->fallback, argv, nargsf, kwnames);
}

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_graphc_entry.Entry",
    .tp_doc = "An executable's entry in C: one signature's plan run as one call.",
    .tp_basicsize = sizeof(Entry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Entry, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_dealloc = (destructor)entry_dealloc,
};

static void *address(PyObject *o) { return PyLong_AsVoidPtr(o); }

/* make(fallback, failed, keep, run, tape, args, slots, specs, nin, nout, returns, lock,
   nogil, recycled): the addresses as ints, into memory `keep` holds; `specs` as
   Entry's; `lock` a threading.Lock or None (then `nogil` must be 0); `recycled` one
   byte per output, nonzero where it is recycled. */
static PyObject *make(PyObject *module, PyObject *argv) {
    PyObject *fallback, *failed, *keep, *run, *tape, *args, *slots, *specs, *lock;
    Py_ssize_t nin, nout, nrecycled;
    const char *recycled;
    int returns, nogil;
    if (!PyArg_ParseTuple(argv, "OOOOOOOOnniOpy#", &fallback, &failed, &keep, &run, &tape, &args,
                          &slots, &specs, &nin, &nout, &returns, &lock, &nogil, &recycled,
                          &nrecycled))
        return NULL;
    if (nin < 0 || nout < 0 || nin + nout > GC_ENTRY_MAX_ARRAYS || returns < 0 || returns > 2 ||
        (returns == 1 && nout != 1) || (returns == 0 && nout != 0) ||
        (nogil && lock == Py_None) || nrecycled != nout) {
        PyErr_SetString(PyExc_ValueError, "_graphc_entry.make: inconsistent counts");
        return NULL;
    }
    PyObject *acquire = NULL, *release = NULL;
    if (lock != Py_None) {
        acquire = PyObject_GetAttrString(lock, "acquire");
        release = acquire == NULL ? NULL : PyObject_GetAttrString(lock, "release");
        if (release == NULL) {
            Py_XDECREF(acquire);
            return NULL;
        }
    }
    Entry *self = PyObject_GC_New(Entry, &EntryType);
    if (self == NULL) {
        Py_XDECREF(acquire);
        Py_XDECREF(release);
        return NULL;
    }
    self->acquire = acquire;
    self->release = release;
    self->nogil = nogil;
    self->vectorcall = entry_call;
    self->run = (gc_tape_fn)address(run);
    self->tape = (const int64_t *)address(tape);
    self->args = (int64_t *)address(args);
    self->slots = (int64_t *)address(slots);
    self->specs = (const int64_t *)address(specs);
    self->nin = nin;
    self->nout = nout;
    self->returns = returns;
    for (Py_ssize_t j = 0; j < GC_ENTRY_MAX_ARRAYS; j++) {
        self->last[j] = NULL;
        self->recycled[j] = j < nout && recycled[j] != 0;
    }
    Py_INCREF(fallback);
    self->fallback = fallback;
    Py_INCREF(failed);
    self->failed = failed;
    Py_INCREF(keep);
    self->keep = keep;
    if (PyErr_Occurred()) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyMethodDef methods[] = {
    {"make", make, METH_VARARGS, "Make an Entry (native/entry.py says how)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_graphc_entry", "graphc's entries in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__graphc_entry(void) {
    import_array();
    if (PyType_Ready(&EntryType) < 0) return NULL;
    return PyModule_Create(&module);
}
