/* ---- a walk of two strided arrays of one shape (csrc/strided_copy.c, csrc/unslice.c) ----
   The n elements of `item` bytes of a shape of nd dims, walked in C order: element i at
   sum(index[d] from[d]) bytes into src and sum(index[d] to[d]) into dst, strides of any
   sign (the Python side drops dims of length 1 and merges each dim into the next where
   both arrays have them adjacent, so nd is small and the last dim is the longest run it
   can be). The elements are copied as bytes: the bits are the source's (nan payloads,
   -0.0) whatever the dtype. */
#ifndef GC_STRIDED_WALK
#define GC_STRIDED_WALK

#define GC_WALK_DIMS 32

/* the k elements of a run, `from` bytes apart in src, `to` bytes apart in dst: one memcpy
   when both are adjacent, else a loop of the element's width (1, 2, 4 or 8 bytes; any
   other width by memcpy per element), its destination's step a constant when the
   elements there are adjacent (a copy's: with the step a variable, a float32 transpose
   of 512 x 784 took 1.06-1.11x the time of the copy's own loop before this walk) */
#define GC_WALK_LOOP(width, step) \
    for (int64_t j = 0; j < k; j++) memcpy(dst + j * (step), src + j * from, width)
#define GC_WALK_WIDTH(width) \
    do { if (to == (width)) GC_WALK_LOOP(width, width); else GC_WALK_LOOP(width, to); } while (0)
GC_INLINE void gc_walk_run(const char *src, char *dst, int64_t k, int64_t from, int64_t to,
                           int64_t item) {
    if (from == item && to == item)
        memcpy(dst, src, (size_t)(k * item));
    else if (item == 4)
        GC_WALK_WIDTH(4);
    else if (item == 8)
        GC_WALK_WIDTH(8);
    else if (item == 2)
        GC_WALK_WIDTH(2);
    else if (item == 1)
        GC_WALK_WIDTH(1);
    else
        GC_WALK_LOOP((size_t)item, to);
}
#undef GC_WALK_WIDTH
#undef GC_WALK_LOOP

/* elements [lo, hi) of the walk from src into dst, run by run along the last dim. The
   position is kept as byte offsets into each, counted like an odometer (divided only
   once, to find where lo is). The descriptor is read into local arrays first: a store
   through dst (char) may alias any memory, so the caller's arrays would be read again
   after every run (a head merge's 8192 runs of 128 bytes took 1.13x the time) */
static void gc_walk(const char *src, char *dst, const int64_t *shape, const int64_t *from,
                    const int64_t *to, int64_t nd, int64_t item, int64_t lo, int64_t hi) {
    int64_t index[GC_WALK_DIMS], len[GC_WALK_DIMS], fs[GC_WALK_DIMS], ts[GC_WALK_DIMS];
    int64_t s = 0, d = 0, rest = lo;
    for (int64_t k = nd - 1; k >= 0; k--) {
        len[k] = shape[k];
        fs[k] = from[k];
        ts[k] = to[k];
        index[k] = rest % len[k];
        rest /= len[k];
        s += index[k] * fs[k];
        d += index[k] * ts[k];
    }
    const int64_t last = nd - 1, run = len[last], f = fs[last], t = ts[last];
    int64_t left = hi - lo;
    while (left > 0) {
        const int64_t j = index[last], k = run - j < left ? run - j : left;
        gc_walk_run(src + s, dst + d, k, f, t, item);
        left -= k;
        if (left == 0) break;
        s -= j * f; /* back to the row's start, then on to the next row */
        d -= j * t;
        index[last] = 0;
        for (int64_t m = last - 1; m >= 0; m--) {
            s += fs[m];
            d += ts[m];
            if (++index[m] < len[m]) break;
            s -= len[m] * fs[m];
            d -= len[m] * ts[m];
            index[m] = 0;
        }
    }
}

#endif
