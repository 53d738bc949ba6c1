/* one_hot: n labels (integers of `code`: its bytes, negative for unsigned) into n rows
   of `classes` entries of `size` bytes each, every entry zero (memset: +0.0, False, 0)
   but a one at the row's label, the one's bytes being the low `size` bytes of `one`
   (native/one_hot.py builds them, little-endian). A label equal to `ignore` (when
   `ignoring`) keeps its row of zeros. Every label is checked before anything is
   written: returns 1 when one is outside [0, classes) and not ignored, 0 otherwise
   (the caller raises one_hot's own error, naming the label). */
static inline int64_t gc_label_at(const char *labels, int64_t code, int64_t i) {
    switch (code) {
    case 1: return ((const int8_t *)labels)[i];
    case 2: return ((const int16_t *)labels)[i];
    case 4: return ((const int32_t *)labels)[i];
    case -1: return ((const uint8_t *)labels)[i];
    case -2: return ((const uint16_t *)labels)[i];
    case -4: return ((const uint32_t *)labels)[i];
    case -8: { /* above INT64_MAX: out of range whatever the classes */
        uint64_t u = ((const uint64_t *)labels)[i];
        return u > (uint64_t)INT64_MAX ? -1 : (int64_t)u; }
    default: return ((const int64_t *)labels)[i];
    }
}

/* whether label i equals `ignore`, compared as numbers: an unsigned label never equals
   a negative one (gc_label_at's -1 for a uint64 past INT64_MAX included) */
static inline int gc_label_ignored(const char *labels, int64_t code, int64_t i, int64_t ignore) {
    if (code < 0 && ignore < 0) return 0;
    if (code == -8) return ((const uint64_t *)labels)[i] == (uint64_t)ignore;
    return gc_label_at(labels, code, i) == ignore;
}

GC_EXPORT int64_t gc_one_hot(int64_t n, const char *labels, int64_t code, char *out,
                             int64_t classes, int64_t one, int64_t size, int64_t ignoring,
                             int64_t ignore) {
    for (int64_t i = 0; i < n; i++) {
        int64_t label = gc_label_at(labels, code, i);
        int inside = label >= 0 && label < classes;
        if (!inside && !(ignoring && gc_label_ignored(labels, code, i, ignore))) return 1;
    }
    memset(out, 0, (size_t)(n * classes * size));
    for (int64_t i = 0; i < n; i++) {
        int64_t label = gc_label_at(labels, code, i);
        if (label >= 0 && label < classes && !(ignoring && label == ignore))
            memcpy(out + (i * classes + label) * size, &one, (size_t)size);
    }
    return 0;
}
