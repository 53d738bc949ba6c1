#define T double
MPB_ROWS22(f64, double)
MPB_KERNEL(f64, double, mpb_rows22_f64)
#undef T
