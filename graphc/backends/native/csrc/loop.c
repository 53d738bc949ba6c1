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

#define GC_TAPE_MAX_ARGS 40

/* GC_Tn: n words as parameter types; GC_An: the first n words of `a` as arguments */
#define GC_T1 int64_t
#define GC_A1 a[0]
#define GC_T2 GC_T1, int64_t
#define GC_A2 GC_A1, a[1]
#define GC_T3 GC_T2, int64_t
#define GC_A3 GC_A2, a[2]
#define GC_T4 GC_T3, int64_t
#define GC_A4 GC_A3, a[3]
#define GC_T5 GC_T4, int64_t
#define GC_A5 GC_A4, a[4]
#define GC_T6 GC_T5, int64_t
#define GC_A6 GC_A5, a[5]
#define GC_T7 GC_T6, int64_t
#define GC_A7 GC_A6, a[6]
#define GC_T8 GC_T7, int64_t
#define GC_A8 GC_A7, a[7]
#define GC_T9 GC_T8, int64_t
#define GC_A9 GC_A8, a[8]
#define GC_T10 GC_T9, int64_t
#define GC_A10 GC_A9, a[9]
#define GC_T11 GC_T10, int64_t
#define GC_A11 GC_A10, a[10]
#define GC_T12 GC_T11, int64_t
#define GC_A12 GC_A11, a[11]
#define GC_T13 GC_T12, int64_t
#define GC_A13 GC_A12, a[12]
#define GC_T14 GC_T13, int64_t
#define GC_A14 GC_A13, a[13]
#define GC_T15 GC_T14, int64_t
#define GC_A15 GC_A14, a[14]
#define GC_T16 GC_T15, int64_t
#define GC_A16 GC_A15, a[15]
#define GC_T17 GC_T16, int64_t
#define GC_A17 GC_A16, a[16]
#define GC_T18 GC_T17, int64_t
#define GC_A18 GC_A17, a[17]
#define GC_T19 GC_T18, int64_t
#define GC_A19 GC_A18, a[18]
#define GC_T20 GC_T19, int64_t
#define GC_A20 GC_A19, a[19]
#define GC_T21 GC_T20, int64_t
#define GC_A21 GC_A20, a[20]
#define GC_T22 GC_T21, int64_t
#define GC_A22 GC_A21, a[21]
#define GC_T23 GC_T22, int64_t
#define GC_A23 GC_A22, a[22]
#define GC_T24 GC_T23, int64_t
#define GC_A24 GC_A23, a[23]
#define GC_T25 GC_T24, int64_t
#define GC_A25 GC_A24, a[24]
#define GC_T26 GC_T25, int64_t
#define GC_A26 GC_A25, a[25]
#define GC_T27 GC_T26, int64_t
#define GC_A27 GC_A26, a[26]
#define GC_T28 GC_T27, int64_t
#define GC_A28 GC_A27, a[27]
#define GC_T29 GC_T28, int64_t
#define GC_A29 GC_A28, a[28]
#define GC_T30 GC_T29, int64_t
#define GC_A30 GC_A29, a[29]
#define GC_T31 GC_T30, int64_t
#define GC_A31 GC_A30, a[30]
#define GC_T32 GC_T31, int64_t
#define GC_A32 GC_A31, a[31]
#define GC_T33 GC_T32, int64_t
#define GC_A33 GC_A32, a[32]
#define GC_T34 GC_T33, int64_t
#define GC_A34 GC_A33, a[33]
#define GC_T35 GC_T34, int64_t
#define GC_A35 GC_A34, a[34]
#define GC_T36 GC_T35, int64_t
#define GC_A36 GC_A35, a[35]
#define GC_T37 GC_T36, int64_t
#define GC_A37 GC_A36, a[36]
#define GC_T38 GC_T37, int64_t
#define GC_A38 GC_A37, a[37]
#define GC_T39 GC_T38, int64_t
#define GC_A39 GC_A38, a[38]
#define GC_T40 GC_T39, int64_t
#define GC_A40 GC_A39, a[39]
#define GC_CALL(n) \
    case n: return ((int64_t (*)(GC_T##n))fn)(GC_A##n);

static int64_t gc_tape_call(int64_t address, int64_t argc, const int64_t *a) {
    const void *fn = (const void *)address;
    switch (argc) {
    GC_CALL(1)
    GC_CALL(2)
    GC_CALL(3)
    GC_CALL(4)
    GC_CALL(5)
    GC_CALL(6)
    GC_CALL(7)
    GC_CALL(8)
    GC_CALL(9)
    GC_CALL(10)
    GC_CALL(11)
    GC_CALL(12)
    GC_CALL(13)
    GC_CALL(14)
    GC_CALL(15)
    GC_CALL(16)
    GC_CALL(17)
    GC_CALL(18)
    GC_CALL(19)
    GC_CALL(20)
    GC_CALL(21)
    GC_CALL(22)
    GC_CALL(23)
    GC_CALL(24)
    GC_CALL(25)
    GC_CALL(26)
    GC_CALL(27)
    GC_CALL(28)
    GC_CALL(29)
    GC_CALL(30)
    GC_CALL(31)
    GC_CALL(32)
    GC_CALL(33)
    GC_CALL(34)
    GC_CALL(35)
    GC_CALL(36)
    GC_CALL(37)
    GC_CALL(38)
    GC_CALL(39)
    GC_CALL(40)
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
