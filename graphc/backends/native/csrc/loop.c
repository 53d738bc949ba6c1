/* A loop's steps in C: its body's kernel calls, recorded once as a tape, replayed per step.

   loops.py records the calls one run of a body's plan makes (the kernels and their
   arguments) and which arguments are addresses inside the body's inputs and outputs.
   Per step, the runner points those arguments at that step's arrays and makes the
   calls in order; the interpreter is not involved until the loop ends.

   A tape is int64 words: [ncalls, nrelocs], then per call (fn, status, first, argc),
   then per relocation (position, slot, offset). `fn` is the kernel's address (0: a copy
   of args[first + 2] bytes from args[first + 1] to args[first]), `status` 1 for a
   kernel that returns a nonzero status when its scratch allocation fails, its
   arguments are args[first .. first + argc). A relocation sets args[position] to
   slots[slot] + offset before the step's calls. Slots are the body's parameters in
   order: carries, then xs rows (scan) or constants, then its outputs.

   Kernels are called as functions of int64 words: on x86-64 System V (the only
   platform the native backend builds for) an int64 and a pointer argument travel
   alike, in the same register or stack slot, as cffi's and ctypes' declared
   prototypes also assume; the return register of a kernel returning nothing is read
   only for kernels with a status. */

#define GC_TAPE_MAX_ARGS 24

typedef int64_t w_;

static int64_t gc_tape_call(int64_t fn, int64_t argc, const int64_t *a) {
    const void *f = (const void *)fn;
    switch (argc) {
#define GC_T(...) return ((int64_t (*)(__VA_ARGS__))f)
    case 1: GC_T(w_)(a[0]);
    case 2: GC_T(w_, w_)(a[0], a[1]);
    case 3: GC_T(w_, w_, w_)(a[0], a[1], a[2]);
    case 4: GC_T(w_, w_, w_, w_)(a[0], a[1], a[2], a[3]);
    case 5: GC_T(w_, w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4]);
    case 6: GC_T(w_, w_, w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5]);
    case 7: GC_T(w_, w_, w_, w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    case 8: GC_T(w_, w_, w_, w_, w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
    case 9: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5], a[6],
                                                     a[7], a[8]);
    case 10: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5],
                                                          a[6], a[7], a[8], a[9]);
    case 11: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4],
                                                              a[5], a[6], a[7], a[8], a[9],
                                                              a[10]);
    case 12: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]);
    case 13: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12]);
    case 14: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13]);
    case 15: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13], a[14]);
    case 16: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13], a[14], a[15]);
    case 17: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13], a[14], a[15], a[16]);
    case 18: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13], a[14], a[15], a[16], a[17]);
    case 19: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_)(
        a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
        a[13], a[14], a[15], a[16], a[17], a[18]);
    case 20: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_,
                  w_)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
                      a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19]);
    case 21: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_,
                  w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10],
                          a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20]);
    case 22: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_,
                  w_, w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10],
                              a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19],
                              a[20], a[21]);
    case 23: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_,
                  w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
                                  a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17],
                                  a[18], a[19], a[20], a[21], a[22]);
    case 24: GC_T(w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_, w_,
                  w_, w_, w_, w_, w_)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                                      a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16],
                                      a[17], a[18], a[19], a[20], a[21], a[22], a[23]);
#undef GC_T
    }
    return 0; /* loops.py records no call of more than GC_TAPE_MAX_ARGS words */
}

/* one run of a body: 0, or 1 + the index of the call whose status reported a failure */
static int64_t gc_tape_run(const int64_t *tape, int64_t *args, const int64_t *slots) {
    const int64_t ncalls = tape[0], nrel = tape[1];
    const int64_t *calls = tape + 2, *rel = calls + 4 * ncalls;
    for (int64_t r = 0; r < nrel; r++)
        args[rel[3 * r]] = slots[rel[3 * r + 1]] + rel[3 * r + 2];
    for (int64_t c = 0; c < ncalls; c++) {
        const int64_t *k = calls + 4 * c;
        const int64_t *a = args + k[2];
        if (k[0] == 0) {
            memmove((void *)a[0], (const void *)a[1], (size_t)a[2]);
            continue;
        }
        int64_t status = gc_tape_call(k[0], k[3], a);
        if (k[1] && status) return c + 1;
    }
    return 0;
}

/* A scan of `length` steps (reversed: t from length - 1 down). `bases` holds, in slot
   order, the initial carries, the stacked xs, the constants, the final carries and
   the stacked ys; `rows` each slot's bytes per step (xs and ys; 0 elsewhere). The
   prologue's calls (which read only constants) are made first, once. Step s reads the
   carries step s - 1 wrote (the initial ones at s = 0) and writes its carries into
   buf0 (s even) or buf1 (s odd), the last step into the final ones, so a step never
   writes what it reads (a carry run in place has buf0 and buf1 at its final buffer).
   Returns what gc_tape_run returned, at the failing step. */
GC_EXPORT int64_t gc_scan_run(int64_t length, const int64_t *tape, int64_t *args,
                              int64_t *slots, const int64_t *bases, const int64_t *rows,
                              const int64_t *buf0, const int64_t *buf1,
                              const int64_t *pro_tape, int64_t *pro_args, int64_t reverse,
                              int64_t nc, int64_t nx, int64_t nk, int64_t ny) {
    const int64_t outs = nc + nx + nk, total = outs + nc + ny;
    if (length > 0) gc_tape_run(pro_tape, pro_args, bases);
    for (int64_t s = 0; s < length; s++) {
        const int64_t t = reverse ? length - 1 - s : s;
        for (int64_t j = 0; j < total; j++) slots[j] = bases[j] + t * rows[j];
        for (int64_t k = 0; k < nc; k++) {
            if (s > 0) slots[k] = (s - 1) % 2 ? buf1[k] : buf0[k];
            if (s < length - 1) slots[outs + k] = s % 2 ? buf1[k] : buf0[k];
        }
        int64_t failed = gc_tape_run(tape, args, slots);
        if (failed) return failed;
    }
    return 0;
}

/* A while loop: the condition's tape writes the flag (a bool byte, its last slot) from
   the carries (its slots: the carries, its constants, the flag); while it holds, the
   body's tape (slots: the carries, its constants, its carries out) writes the next
   carries into buf0 and buf1 in turn. The last carries are then copied into `results`
   (nbytes each). `cond_slots` and `body_slots` arrive with their constants (and the
   flag) filled in; the prologues' calls (which read only constants) are made first,
   once. Returns 0, 1 + a failing call's index in the body's tape, or minus (1 + its
   index) in the condition's. */
GC_EXPORT int64_t gc_while_run(int64_t nc, const int64_t *cond_tape, int64_t *cond_args,
                               int64_t *cond_slots, const int64_t *body_tape,
                               int64_t *body_args, int64_t *body_slots, const int64_t *init,
                               const int64_t *buf0, const int64_t *buf1,
                               const int64_t *results, const int64_t *nbytes,
                               const uint8_t *flag, const int64_t *cond_pro_tape,
                               int64_t *cond_pro_args, const int64_t *body_pro_tape,
                               int64_t *body_pro_args, int64_t nk) {
    const int64_t *current = init;
    gc_tape_run(cond_pro_tape, cond_pro_args, cond_slots);
    gc_tape_run(body_pro_tape, body_pro_args, body_slots);
    for (int64_t s = 0;; s++) {
        for (int64_t k = 0; k < nc; k++) cond_slots[k] = current[k];
        int64_t failed = gc_tape_run(cond_tape, cond_args, cond_slots);
        if (failed) return -failed;
        if (!*flag) break;
        const int64_t *next = s % 2 ? buf1 : buf0;
        for (int64_t k = 0; k < nc; k++) {
            body_slots[k] = current[k];
            body_slots[nc + nk + k] = next[k];
        }
        failed = gc_tape_run(body_tape, body_args, body_slots);
        if (failed) return failed;
        current = next;
    }
    for (int64_t k = 0; k < nc; k++)
        memmove((void *)results[k], (const void *)current[k], (size_t)nbytes[k]);
    return 0;
}
