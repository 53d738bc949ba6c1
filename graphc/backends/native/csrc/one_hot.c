/* one_hot: n labels (integers of `code`: its bytes, negative for unsigned) into n rows
   of `classes` entries of `size` bytes each, every entry zero (memset: +0.0, False, 0)
   but a one at the row's label, the one's bytes being the low `size` bytes of `one`
   (native/one_hot.py builds them, little-endian). Every label is checked before
   anything is written: returns 1 when one is outside [0, classes), 0 otherwise (the
   caller raises one_hot's own error, naming the label). */
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

GC_EXPORT int64_t gc_one_hot(int64_t n, const char *labels, int64_t code, char *out,
                             int64_t classes, int64_t one, int64_t size) {
    for (int64_t i = 0; i < n; i++) {
        int64_t label = gc_label_at(labels, code, i);
        if (label < 0 || label >= classes) return 1;
    }
    memset(out, 0, (size_t)(n * classes * size));
    for (int64_t i = 0; i < n; i++)
        memcpy(out + (i * classes + gc_label_at(labels, code, i)) * size, &one, (size_t)size);
    return 0;
}
