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

#define GC_TAPE_MAX_ARGS 128

/* GC_Tn: n words as parameter types; GC_An: the first n words of `a` as arguments (a
   fused group passes each of its constants by address: a long one takes many) */
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
#define GC_T41 GC_T40, int64_t
#define GC_A41 GC_A40, a[40]
#define GC_T42 GC_T41, int64_t
#define GC_A42 GC_A41, a[41]
#define GC_T43 GC_T42, int64_t
#define GC_A43 GC_A42, a[42]
#define GC_T44 GC_T43, int64_t
#define GC_A44 GC_A43, a[43]
#define GC_T45 GC_T44, int64_t
#define GC_A45 GC_A44, a[44]
#define GC_T46 GC_T45, int64_t
#define GC_A46 GC_A45, a[45]
#define GC_T47 GC_T46, int64_t
#define GC_A47 GC_A46, a[46]
#define GC_T48 GC_T47, int64_t
#define GC_A48 GC_A47, a[47]
#define GC_T49 GC_T48, int64_t
#define GC_A49 GC_A48, a[48]
#define GC_T50 GC_T49, int64_t
#define GC_A50 GC_A49, a[49]
#define GC_T51 GC_T50, int64_t
#define GC_A51 GC_A50, a[50]
#define GC_T52 GC_T51, int64_t
#define GC_A52 GC_A51, a[51]
#define GC_T53 GC_T52, int64_t
#define GC_A53 GC_A52, a[52]
#define GC_T54 GC_T53, int64_t
#define GC_A54 GC_A53, a[53]
#define GC_T55 GC_T54, int64_t
#define GC_A55 GC_A54, a[54]
#define GC_T56 GC_T55, int64_t
#define GC_A56 GC_A55, a[55]
#define GC_T57 GC_T56, int64_t
#define GC_A57 GC_A56, a[56]
#define GC_T58 GC_T57, int64_t
#define GC_A58 GC_A57, a[57]
#define GC_T59 GC_T58, int64_t
#define GC_A59 GC_A58, a[58]
#define GC_T60 GC_T59, int64_t
#define GC_A60 GC_A59, a[59]
#define GC_T61 GC_T60, int64_t
#define GC_A61 GC_A60, a[60]
#define GC_T62 GC_T61, int64_t
#define GC_A62 GC_A61, a[61]
#define GC_T63 GC_T62, int64_t
#define GC_A63 GC_A62, a[62]
#define GC_T64 GC_T63, int64_t
#define GC_A64 GC_A63, a[63]
#define GC_T65 GC_T64, int64_t
#define GC_A65 GC_A64, a[64]
#define GC_T66 GC_T65, int64_t
#define GC_A66 GC_A65, a[65]
#define GC_T67 GC_T66, int64_t
#define GC_A67 GC_A66, a[66]
#define GC_T68 GC_T67, int64_t
#define GC_A68 GC_A67, a[67]
#define GC_T69 GC_T68, int64_t
#define GC_A69 GC_A68, a[68]
#define GC_T70 GC_T69, int64_t
#define GC_A70 GC_A69, a[69]
#define GC_T71 GC_T70, int64_t
#define GC_A71 GC_A70, a[70]
#define GC_T72 GC_T71, int64_t
#define GC_A72 GC_A71, a[71]
#define GC_T73 GC_T72, int64_t
#define GC_A73 GC_A72, a[72]
#define GC_T74 GC_T73, int64_t
#define GC_A74 GC_A73, a[73]
#define GC_T75 GC_T74, int64_t
#define GC_A75 GC_A74, a[74]
#define GC_T76 GC_T75, int64_t
#define GC_A76 GC_A75, a[75]
#define GC_T77 GC_T76, int64_t
#define GC_A77 GC_A76, a[76]
#define GC_T78 GC_T77, int64_t
#define GC_A78 GC_A77, a[77]
#define GC_T79 GC_T78, int64_t
#define GC_A79 GC_A78, a[78]
#define GC_T80 GC_T79, int64_t
#define GC_A80 GC_A79, a[79]
#define GC_T81 GC_T80, int64_t
#define GC_A81 GC_A80, a[80]
#define GC_T82 GC_T81, int64_t
#define GC_A82 GC_A81, a[81]
#define GC_T83 GC_T82, int64_t
#define GC_A83 GC_A82, a[82]
#define GC_T84 GC_T83, int64_t
#define GC_A84 GC_A83, a[83]
#define GC_T85 GC_T84, int64_t
#define GC_A85 GC_A84, a[84]
#define GC_T86 GC_T85, int64_t
#define GC_A86 GC_A85, a[85]
#define GC_T87 GC_T86, int64_t
#define GC_A87 GC_A86, a[86]
#define GC_T88 GC_T87, int64_t
#define GC_A88 GC_A87, a[87]
#define GC_T89 GC_T88, int64_t
#define GC_A89 GC_A88, a[88]
#define GC_T90 GC_T89, int64_t
#define GC_A90 GC_A89, a[89]
#define GC_T91 GC_T90, int64_t
#define GC_A91 GC_A90, a[90]
#define GC_T92 GC_T91, int64_t
#define GC_A92 GC_A91, a[91]
#define GC_T93 GC_T92, int64_t
#define GC_A93 GC_A92, a[92]
#define GC_T94 GC_T93, int64_t
#define GC_A94 GC_A93, a[93]
#define GC_T95 GC_T94, int64_t
#define GC_A95 GC_A94, a[94]
#define GC_T96 GC_T95, int64_t
#define GC_A96 GC_A95, a[95]
#define GC_T97 GC_T96, int64_t
#define GC_A97 GC_A96, a[96]
#define GC_T98 GC_T97, int64_t
#define GC_A98 GC_A97, a[97]
#define GC_T99 GC_T98, int64_t
#define GC_A99 GC_A98, a[98]
#define GC_T100 GC_T99, int64_t
#define GC_A100 GC_A99, a[99]
#define GC_T101 GC_T100, int64_t
#define GC_A101 GC_A100, a[100]
#define GC_T102 GC_T101, int64_t
#define GC_A102 GC_A101, a[101]
#define GC_T103 GC_T102, int64_t
#define GC_A103 GC_A102, a[102]
#define GC_T104 GC_T103, int64_t
#define GC_A104 GC_A103, a[103]
#define GC_T105 GC_T104, int64_t
#define GC_A105 GC_A104, a[104]
#define GC_T106 GC_T105, int64_t
#define GC_A106 GC_A105, a[105]
#define GC_T107 GC_T106, int64_t
#define GC_A107 GC_A106, a[106]
#define GC_T108 GC_T107, int64_t
#define GC_A108 GC_A107, a[107]
#define GC_T109 GC_T108, int64_t
#define GC_A109 GC_A108, a[108]
#define GC_T110 GC_T109, int64_t
#define GC_A110 GC_A109, a[109]
#define GC_T111 GC_T110, int64_t
#define GC_A111 GC_A110, a[110]
#define GC_T112 GC_T111, int64_t
#define GC_A112 GC_A111, a[111]
#define GC_T113 GC_T112, int64_t
#define GC_A113 GC_A112, a[112]
#define GC_T114 GC_T113, int64_t
#define GC_A114 GC_A113, a[113]
#define GC_T115 GC_T114, int64_t
#define GC_A115 GC_A114, a[114]
#define GC_T116 GC_T115, int64_t
#define GC_A116 GC_A115, a[115]
#define GC_T117 GC_T116, int64_t
#define GC_A117 GC_A116, a[116]
#define GC_T118 GC_T117, int64_t
#define GC_A118 GC_A117, a[117]
#define GC_T119 GC_T118, int64_t
#define GC_A119 GC_A118, a[118]
#define GC_T120 GC_T119, int64_t
#define GC_A120 GC_A119, a[119]
#define GC_T121 GC_T120, int64_t
#define GC_A121 GC_A120, a[120]
#define GC_T122 GC_T121, int64_t
#define GC_A122 GC_A121, a[121]
#define GC_T123 GC_T122, int64_t
#define GC_A123 GC_A122, a[122]
#define GC_T124 GC_T123, int64_t
#define GC_A124 GC_A123, a[123]
#define GC_T125 GC_T124, int64_t
#define GC_A125 GC_A124, a[124]
#define GC_T126 GC_T125, int64_t
#define GC_A126 GC_A125, a[125]
#define GC_T127 GC_T126, int64_t
#define GC_A127 GC_A126, a[126]
#define GC_T128 GC_T127, int64_t
#define GC_A128 GC_A127, a[127]
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
    GC_CALL(41)
    GC_CALL(42)
    GC_CALL(43)
    GC_CALL(44)
    GC_CALL(45)
    GC_CALL(46)
    GC_CALL(47)
    GC_CALL(48)
    GC_CALL(49)
    GC_CALL(50)
    GC_CALL(51)
    GC_CALL(52)
    GC_CALL(53)
    GC_CALL(54)
    GC_CALL(55)
    GC_CALL(56)
    GC_CALL(57)
    GC_CALL(58)
    GC_CALL(59)
    GC_CALL(60)
    GC_CALL(61)
    GC_CALL(62)
    GC_CALL(63)
    GC_CALL(64)
    GC_CALL(65)
    GC_CALL(66)
    GC_CALL(67)
    GC_CALL(68)
    GC_CALL(69)
    GC_CALL(70)
    GC_CALL(71)
    GC_CALL(72)
    GC_CALL(73)
    GC_CALL(74)
    GC_CALL(75)
    GC_CALL(76)
    GC_CALL(77)
    GC_CALL(78)
    GC_CALL(79)
    GC_CALL(80)
    GC_CALL(81)
    GC_CALL(82)
    GC_CALL(83)
    GC_CALL(84)
    GC_CALL(85)
    GC_CALL(86)
    GC_CALL(87)
    GC_CALL(88)
    GC_CALL(89)
    GC_CALL(90)
    GC_CALL(91)
    GC_CALL(92)
    GC_CALL(93)
    GC_CALL(94)
    GC_CALL(95)
    GC_CALL(96)
    GC_CALL(97)
    GC_CALL(98)
    GC_CALL(99)
    GC_CALL(100)
    GC_CALL(101)
    GC_CALL(102)
    GC_CALL(103)
    GC_CALL(104)
    GC_CALL(105)
    GC_CALL(106)
    GC_CALL(107)
    GC_CALL(108)
    GC_CALL(109)
    GC_CALL(110)
    GC_CALL(111)
    GC_CALL(112)
    GC_CALL(113)
    GC_CALL(114)
    GC_CALL(115)
    GC_CALL(116)
    GC_CALL(117)
    GC_CALL(118)
    GC_CALL(119)
    GC_CALL(120)
    GC_CALL(121)
    GC_CALL(122)
    GC_CALL(123)
    GC_CALL(124)
    GC_CALL(125)
    GC_CALL(126)
    GC_CALL(127)
    GC_CALL(128)
    }
    return 0; /* loops.py records no call of more than GC_TAPE_MAX_ARGS words */
}

/* a run of a body from call `start` on: 0, or 1 + the index of the call whose status
   reported a failure. With a clock `at` (else null), at[start] is the time the calls
   start and at[c + 1] the time call c returns (gc_now_ns) */
static int64_t gc_tape_from(const int64_t *tape, int64_t *args, const int64_t *slots,
                            int64_t start, int64_t *at) {
    const int64_t ncalls = tape[0], nrel = tape[1];
    const int64_t *calls = tape + 2, *rel = calls + 4 * ncalls;
    for (int64_t r = 0; r < nrel; r++)
        args[rel[3 * r]] = slots[rel[3 * r + 1]] + rel[3 * r + 2];
    if (at) at[start] = gc_now_ns();
    for (int64_t c = start; c < ncalls; c++) {
        const int64_t *k = calls + 4 * c;
        const int64_t *a = args + k[2];
        int64_t status = 0;
        if (k[0] == 0) memmove((void *)a[0], (const void *)a[1], (size_t)a[2]);
        else status = gc_tape_call(k[0], k[3], a);
        if (at) at[c + 1] = gc_now_ns();
        if (k[1] && status) return c + 1;
    }
    return 0;
}

/* one run of a body */
static int64_t gc_tape_run(const int64_t *tape, int64_t *args, const int64_t *slots) {
    return gc_tape_from(tape, args, slots, 0, 0);
}

/* One run of a tape outside any loop: a whole plan recorded as one (native/entry.py),
   its slots the plan's inputs then its outputs, from call `start` on (0; the call after
   one whose failure was repaired: Kernel.repairs). Returns what gc_tape_from returns. */
GC_EXPORT int64_t gc_tape_once(const int64_t *tape, int64_t *args, const int64_t *slots,
                               int64_t start) {
    return gc_tape_from(tape, args, slots, start, 0);
}

/* gc_tape_once with the clock read after every call into `at` (gc_tape_from's): a
   profile of the entry's calls (Executable.profile) */
GC_EXPORT int64_t gc_tape_clocked(const int64_t *tape, int64_t *args, const int64_t *slots,
                                  int64_t start, int64_t *at) {
    return gc_tape_from(tape, args, slots, start, at);
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
