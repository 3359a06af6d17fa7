/* The run side of many runs' bootstrap Spearman sums (evaluation.significance).

   sums(counts, ys, orders, ends, below, extra_cy, extra_g3): for each run r, walking its
   sorted order (orders[r]), and each resample b (a column of counts and ys, one row per pair):
   below[r, b] = sum over the run's groups of equal scores of (draws before the group) times
   (the group's Y); extra_cy[r, b] = sum over groups of two or more of (group draws x group Y
   - sum of the members' draws x Y); extra_g3 likewise with cubes of draws. ends[r, t] is 1
   where sorted position t ends a group. counts and ys are whole numbers below 2^24 (the
   caller checks), stored as floats exactly; every sum is a whole number below 2^53, so the
   double sums are exact whatever the order of the additions (no rounding ever happens).

   Python's buffer protocol only: no numpy headers. Compiled once per platform; when it is
   missing, evaluation.significance uses its numpy path, which gives the same numbers. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* resamples handled together: their running sums stay in registers while a run's pairs go
   by (four vectors of four doubles: one AVX2 register each, two SSE2 ones) */
#define LANES 16
typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

typedef void (*run_sums_fn)(const float *restrict, const float *restrict,
                            const int64_t *restrict, const int8_t *restrict, Py_ssize_t,
                            double *restrict);

/* The walk over one run's sorted pairs for one block of LANES resamples. counts, ys: (m,
   LANES) whole numbers stored as floats (exact below 2^24, half the bytes of doubles to move),
   summed as doubles; out: below, extra_cy, extra_g3. Two sets of accumulators, for even and
   odd pairs, so that each addition waits for the one two pairs back (the sums are exact, so
   their order does not matter). LOAD(p) reads four floats at p as four doubles. A macro, so
   that the portable and the AVX2 build are the same code. */
/* one untied pair (its row `at` of counts and Ys) into accumulators s0..s3 */
#define PAIR(LOAD, at, s0, s1, s2, s3) do {                                                  \
        const float *c_ = counts + (at) * LANES, *y_ = ys + (at) * LANES;                    \
        s0 += p0 * LOAD(y_); p0 += LOAD(c_);                                                 \
        s1 += p1 * LOAD(y_ + 4); p1 += LOAD(c_ + 4);                                         \
        s2 += p2 * LOAD(y_ + 8); p2 += LOAD(c_ + 8);                                         \
        s3 += p3 * LOAD(y_ + 12); p3 += LOAD(c_ + 12);                                       \
    } while (0)

#define RUN_SUMS_BODY(LOAD)                                                                  \
    v4d p0 = {0}, p1 = {0}, p2 = {0}, p3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};      \
    v4d d0 = {0}, d1 = {0}, d2 = {0}, d3 = {0};                                              \
    v4d cy[4] = {{0}}, g3[4] = {{0}};                                                        \
    Py_ssize_t t = 0, e;                                                                     \
    int j;                                                                                   \
    while (t < m) {                                                                          \
        for (e = t; e < m && ends[e]; e++) {} /* untied pairs: each its own group */         \
        for (; t + 1 < e; t += 2) {                                                          \
            PAIR(LOAD, order[t], b0, b1, b2, b3);                                            \
            PAIR(LOAD, order[t + 1], d0, d1, d2, d3);                                        \
        }                                                                                    \
        if (t < e) {                                                                         \
            PAIR(LOAD, order[t], b0, b1, b2, b3);                                            \
            t++;                                                                             \
        }                                                                                    \
        if (t >= m) break;                                                                   \
        { /* a group of equal scores, from t to the next end: its draws and Y as one pair's */ \
            v4d gc[4] = {{0}}, gy[4] = {{0}}, scy[4] = {{0}}, sc3[4] = {{0}};                \
            for (e = t; !ends[e]; e++) {} /* the last position always ends a group */        \
            for (; t <= e; t++) {                                                            \
                const float *c = counts + order[t] * LANES, *y = ys + order[t] * LANES;      \
                for (j = 0; j < 4; j++) {                                                    \
                    v4d cj = LOAD(c + 4 * j), yj = LOAD(y + 4 * j);                          \
                    gc[j] += cj; gy[j] += yj; scy[j] += cj * yj; sc3[j] += cj * cj * cj;     \
                }                                                                            \
            }                                                                                \
            b0 += p0 * gy[0]; p0 += gc[0];                                                   \
            b1 += p1 * gy[1]; p1 += gc[1];                                                   \
            b2 += p2 * gy[2]; p2 += gc[2];                                                   \
            b3 += p3 * gy[3]; p3 += gc[3];                                                   \
            for (j = 0; j < 4; j++) {                                                        \
                cy[j] += gc[j] * gy[j] - scy[j];                                             \
                g3[j] += gc[j] * gc[j] * gc[j] - sc3[j];                                     \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    b0 += d0; b1 += d1; b2 += d2; b3 += d3;                                                  \
    memcpy(out, &b0, sizeof b0); memcpy(out + 4, &b1, sizeof b1);                            \
    memcpy(out + 8, &b2, sizeof b2); memcpy(out + 12, &b3, sizeof b3);                       \
    memcpy(out + LANES, cy, sizeof cy);                                                      \
    memcpy(out + 2 * LANES, g3, sizeof g3);

#define LOAD_PORTABLE(from) \
    __extension__({ v4f v_; memcpy(&v_, (from), sizeof v_); __builtin_convertvector(v_, v4d); })

static void run_sums_portable(const float *restrict counts, const float *restrict ys,
                              const int64_t *restrict order, const int8_t *restrict ends,
                              Py_ssize_t m, double *restrict out) {
    RUN_SUMS_BODY(LOAD_PORTABLE)
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2_BUILD 1
#define LOAD_AVX2(from) ((v4d)_mm256_cvtps_pd(_mm_loadu_ps(from)))

__attribute__((target("avx2,fma"))) static void run_sums_avx2(
    const float *restrict counts, const float *restrict ys, const int64_t *restrict order,
    const int8_t *restrict ends, Py_ssize_t m, double *restrict out) {
    RUN_SUMS_BODY(LOAD_AVX2)
}
#endif

/* the AVX2 build where the processor has it, unless asked for the portable one */
static run_sums_fn pick(int portable) {
#ifdef HAVE_AVX2_BUILD
    __builtin_cpu_init();
    if (!portable && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return run_sums_avx2;
#endif
    (void)portable;
    return run_sums_portable;
}

static int get(PyObject *obj, Py_buffer *view, const char *format, int writable,
               const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    /* numpy's int64 is 'l' where a long has 64 bits, 'q' elsewhere */
    int same = strcmp(view->format, format) == 0 ||
               (format[0] == 'q' && view->itemsize == 8 && strcmp(view->format, "l") == 0);
    if (view->ndim != 2 || !same) {
        PyErr_Format(PyExc_TypeError, "%s: a C-contiguous 2-d array of format '%s'", name,
                     format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *sums(PyObject *self, PyObject *args) {
    PyObject *o[7];
    Py_buffer v[7];
    int portable = 0;
    run_sums_fn run_sums;
    static const char *formats[7] = {"i", "i", "q", "b", "d", "d", "d"};
    static const char *names[7] = {"counts", "ys", "orders", "ends", "below", "extra_cy",
                                   "extra_g3"};
    int i, got = 0;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOO|p", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &portable))
        return NULL;
    run_sums = pick(portable);
    for (; got < 7; got++)
        if (get(o[got], &v[got], formats[got], got >= 4, names[got]) < 0) goto done;
    {
        Py_ssize_t m = v[0].shape[0], b = v[0].shape[1], runs = v[2].shape[0], r, t;
        const int64_t *orders = (const int64_t *)v[2].buf;
        if (v[1].shape[0] != m || v[1].shape[1] != b || v[2].shape[1] != m ||
            v[3].shape[0] != runs || v[3].shape[1] != m) {
            PyErr_SetString(PyExc_ValueError, "sums: mismatched shapes");
            goto done;
        }
        for (i = 4; i < 7; i++)
            if (v[i].shape[0] != runs || v[i].shape[1] != b) {
                PyErr_SetString(PyExc_ValueError, "sums: mismatched output shapes");
                goto done;
            }
        for (t = 0; t < runs * m; t++)
            if (orders[t] < 0 || orders[t] >= m) {
                PyErr_SetString(PyExc_ValueError, "sums: an order outside the pairs");
                goto done;
            }
        /* the walk over a tied group stops at its end: the last position must end one */
        for (r = 0; r < runs && m > 0; r++)
            if (!((const int8_t *)v[3].buf)[r * m + m - 1]) {
                PyErr_SetString(PyExc_ValueError, "sums: a run's last position ends no group");
                goto done;
            }
        {
            /* each block of LANES resamples packed (blocks, m, LANES), zero-padded: a pair
               never drawn adds nothing; a block's table stays in cache across the runs */
            Py_ssize_t blocks = (b + LANES - 1) / LANES, k, q, j;
            float *packed = PyMem_Calloc((size_t)(2 * blocks * m * LANES), sizeof(float));
            double out[3 * LANES];
            const int32_t *counts = (const int32_t *)v[0].buf, *ys = (const int32_t *)v[1].buf;
            double *below = (double *)v[4].buf, *cy = (double *)v[5].buf,
                   *g3 = (double *)v[6].buf;
            if (packed == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            Py_BEGIN_ALLOW_THREADS
            for (k = 0; k < blocks; k++) {
                float *pc = packed + 2 * k * m * LANES, *py = pc + m * LANES;
                Py_ssize_t width = b - k * LANES < LANES ? b - k * LANES : LANES;
                for (q = 0; q < m; q++)
                    for (j = 0; j < width; j++) {
                        pc[q * LANES + j] = (float)counts[q * b + k * LANES + j];
                        py[q * LANES + j] = (float)ys[q * b + k * LANES + j];
                    }
                for (r = 0; r < runs; r++) {
                    run_sums(pc, py, orders + r * m, (const int8_t *)v[3].buf + r * m, m, out);
                    for (j = 0; j < width; j++) {
                        below[r * b + k * LANES + j] = out[j];
                        cy[r * b + k * LANES + j] = out[LANES + j];
                        g3[r * b + k * LANES + j] = out[2 * LANES + j];
                    }
                }
            }
            Py_END_ALLOW_THREADS
            PyMem_Free(packed);
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"sums", sums, METH_VARARGS,
     "sums(counts, ys, orders, ends, below, extra_cy, extra_g3, portable=False): many runs' "
     "Spearman sums (portable: without the AVX2 build)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_spearman",
                                    "The run side of many runs' bootstrap Spearman sums.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__spearman(void) { return PyModule_Create(&module); }
