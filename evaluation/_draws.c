/* Bootstrap draws counted in the pass that draws them.

   numpy's Generator(PCG64).integers(0, n, size, dtype=np.uint32) for 1 < n <= 2**32 hands out
   the 32-bit halves of PCG64's 64-bit outputs (low half first, the high half kept in the bit
   generator's has_uint32/uinteger for the next call) and maps each to [0, n) by Lemire's
   multiply-and-reject: u * n, rejected while its low 32 bits are below 2**32 mod n. n == 1
   draws nothing. These functions reproduce that stream exactly (the state they return is the
   state numpy's call leaves) and count the draws, per pair or per cell of pairs, as they go;
   resampling.py checks them against numpy and falls back to numpy without them.

   PCG64 is the 128-bit LCG state = state * MULT + inc, stepped before each output, with the
   XSL-RR output (high ^ low 64 bits, rotated right by the top 6 bits). Its step is a serial
   chain, so LANES chains jumped ahead by 1 .. LANES steps, each stepping LANES at a time, fill
   a buffer of outputs in stream order; a rejection only skips a value of the buffer, and the
   final state is the start jumped ahead by the outputs consumed. Where the processor has
   AVX-512 with IFMA, uint8 counts per pair (what resampling asks for) take count_rows_ifma:
   8 chains in vector lanes, Lemire's map for 16 values at once (see its comment).

   moments() sums the count-weighted moments of Pearson and ALL straight from the counts per
   pair (AVX-512 where the processor has it): see its comment below. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>  /* x86-64's baseline: every build's row sums */
#endif
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
/* here, outside any target pragma: each intrinsic keeps its own target (one included under
   the AVX-512 pragma below would carry AVX-512 into the AVX2 build's calls) */
#include <immintrin.h>
#endif

typedef unsigned __int128 u128;

#define MULT ((((u128)0x2360ED051FC65DA4ULL) << 64) | (u128)0x4385DF649FCCF645ULL)
#define LANES 4
/* outputs per buffer (2 * OUTPUTS halves): a few, so that making them (multiplies) and counting
   the last ones (cache misses) overlap in the processor; 16 against 2,048: 1.58 against 1.82 s
   per 10^9 draws counted into 10^6 pairs (C alone); through Python, each value counted as it
   is mapped (count_rows), 8 against 4 and 16: 1.37-1.46 against 1.38-1.55 and 1.69-1.73 s */
#define OUTPUTS 8

#if defined(__GNUC__)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define INLINE static inline __attribute__((always_inline))
#else
#define UNLIKELY(x) (x)
#define LIKELY(x) (x)
#define INLINE static inline
#endif

/* (mult, plus) with state * mult + plus == the state delta steps on */
static void affine(uint64_t delta, u128 inc, u128 *mult, u128 *plus) {
    u128 am = 1, ap = 0, cm = MULT, cp = inc;
    while (delta) {
        if (delta & 1) {
            am *= cm;
            ap = ap * cm + cp;
        }
        cp = (cm + 1) * cp;
        cm *= cm;
        delta >>= 1;
    }
    *mult = am;
    *plus = ap;
}

static u128 advance(u128 state, u128 inc, uint64_t delta) {
    u128 m, p;
    affine(delta, inc, &m, &p);
    return state * m + p;
}

INLINE uint64_t output(u128 s) {
    uint64_t hi = (uint64_t)(s >> 64), x = hi ^ (uint64_t)s;
    unsigned rot = (unsigned)(hi >> 58);
    return (x >> rot) | (x << ((64 - rot) & 63));
}

typedef struct {
    u128 lane[LANES];
    u128 a, c;             /* LANES steps at once */
    uint64_t base;         /* stream position of buf[0] (the carried-in half is position 0) */
    size_t pos, len;       /* next half of buf to hand out; halves in buf */
    uint32_t buf[2 * OUTPUTS];
} stream_t;

static void stream_init(stream_t *g, u128 state, u128 inc, int has_uint32, uint32_t uinteger) {
    u128 m1 = MULT, s = state;
    for (int j = 0; j < LANES; j++) {
        s = s * m1 + inc;
        g->lane[j] = s;
    }
    affine(LANES, inc, &g->a, &g->c);
    g->base = 0;
    g->pos = 0;
    if (has_uint32) {  /* the half numpy kept comes first */
        g->buf[0] = uinteger;
        g->len = 1;
    } else {
        g->len = 0;
    }
}

static void stream_refill(stream_t *g) {
    g->base += g->len;
    for (size_t t = 0; t < OUTPUTS; t += LANES) {
        for (int j = 0; j < LANES; j++) {
            uint64_t o = output(g->lane[j]);
            g->lane[j] = g->lane[j] * g->a + g->c;
            g->buf[2 * (t + j)] = (uint32_t)o;
            g->buf[2 * (t + j) + 1] = (uint32_t)(o >> 32);
        }
    }
    g->pos = 0;
    g->len = 2 * OUTPUTS;
}

/* The state numpy's generator holds after the stream's first `used` values were handed out. */
static void stream_final(uint64_t used, u128 state, u128 inc, int has_uint32, uint32_t uinteger,
                         u128 *out_state, int *out_has, uint32_t *out_uint) {
    uint64_t carried = has_uint32 && used ? 1 : 0;
    uint64_t halves = used - carried;  /* of the outputs drawn in this call */
    if (halves == 0) {  /* no output drawn: numpy leaves uinteger as it was */
        *out_state = state;
        *out_has = has_uint32 && !carried;
        *out_uint = uinteger;
        return;
    }
    *out_state = advance(state, inc, (halves + 1) / 2);
    *out_has = (int)(halves & 1);
    /* numpy keeps the high half it stored, handed out or not */
    *out_uint = (uint32_t)(output(*out_state) >> 32);
}

/* Lemire's rule, in one place: u maps to (u * n) >> 32 unless the low 32 bits of u * n are
   below 2**32 mod n (then the next value is tried) */
INLINE uint32_t threshold(uint64_t n) { return (uint32_t)(((uint64_t)1 << 32) % n); }
INLINE int rejected(uint64_t m, uint32_t thr) { return (uint32_t)m < thr; }

INLINE void bump(void *row, size_t bin, const void *cell_of, const int out_size,
                 const int cells_size) {
    if (cells_size == 2)
        bin = ((const uint16_t *)cell_of)[bin];
    else if (cells_size == 4)
        bin = ((const uint32_t *)cell_of)[bin];
    if (out_size == 1)
        ((uint8_t *)row)[bin]++;
    else if (out_size == 2)
        ((uint16_t *)row)[bin]++;
    else
        ((uint32_t *)row)[bin]++;
}

/* Whether a row of k counts (size bytes each) holds its n draws: its counts sum to n unless one
   wrapped (a pair or cell drawn 256 times in a row for uint8 counts, 65,536 for uint16; a
   uint32 count holds any row of n <= 2**32 draws but one). Checked once a row, not at each
   count. */
static int row_holds(const void *row, size_t k, int size, uint64_t n) {
    uint64_t total = 0;
    size_t i = 0;
    if (size == 4)
        return 1;
    if (size == 2) {
        for (; i < k; i++)
            total += ((const uint16_t *)row)[i];
        return total == n;
    }
    const uint8_t *bytes = row;
#ifdef __SSE2__
    /* 64 bytes a step in four sums of byte sums (psadbw), whatever the build's -O: a row of a
       million pairs in about 15 us, not the 0.3 ms of a byte loop left unvectorised at -O2 */
    __m128i acc[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(),
                      _mm_setzero_si128()};
    for (; i + 64 <= k; i += 64)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[j] = _mm_add_epi64(acc[j], _mm_sad_epu8(
                _mm_loadu_si128((const __m128i *)(bytes + i + 16 * (size_t)j)),
                _mm_setzero_si128()));
    __m128i all = _mm_add_epi64(_mm_add_epi64(acc[0], acc[1]), _mm_add_epi64(acc[2], acc[3]));
    total = (uint64_t)_mm_cvtsi128_si64(all) +
            (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(all, all));
#endif
    for (; i < k; i++)
        total += bytes[i];
    return total == n;
}

/* Draws rows x n values of [0, n) and counts each row's, through cell_of when given, into
   out's row of k bins (out_size bytes each, zeroed here). Returns the stream values used, or
   UINT64_MAX when a count wrapped (the caller counts again, wider). */
INLINE uint64_t count_rows(stream_t *g, uint64_t n, Py_ssize_t rows, void *out, Py_ssize_t k,
                           const void *cell_of, const int out_size, const int cells_size) {
    const uint32_t thr = threshold(n);
    for (Py_ssize_t r = 0; r < rows; r++) {
        /* counted in place: 1.74 s per 10^9 draws into 10^6 uint8 counts, against 1.90 s in
           one reused row copied out after each */
        void *row = (char *)out + (size_t)r * (size_t)k * (size_t)out_size;
        memset(row, 0, (size_t)k * (size_t)out_size);
        uint64_t need = n;
        while (need) {
            if (g->pos == g->len)
                stream_refill(g);
            size_t avail = g->len - g->pos;
            const uint32_t *p = g->buf + g->pos;
            /* each value mapped and counted at once, a rejection (2**-32 x (2**32 mod n) of
               them) skipped by a branch: 1.37-1.46 s per 10^9 draws into 10^6 pairs, against
               1.47-1.54 for a buffer mapped in a vectorised loop first, counted unchecked when
               none of it was rejected */
            size_t take = avail < need ? avail : (size_t)need;
            size_t kept = take;
            for (size_t i = 0; i < take; i++) {
                uint64_t m = (uint64_t)p[i] * n;
                if (rejected(m, thr)) {  /* the next value instead */
                    kept--;
                    continue;
                }
                bump(row, (size_t)(m >> 32), cell_of, out_size, cells_size);
            }
            g->pos += take;
            need -= kept;
        }
        if (UNLIKELY(!row_holds(row, (size_t)k, out_size, n)))
            return UINT64_MAX;
    }
    return g->base + g->pos;
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define DRAWS_IFMA 1
/* The draws in AVX-512 with IFMA (52-bit multiply-adds; Intel since Ice Lake, AMD since Zen
   4): 8 PCG64 chains jumped ahead 1 .. 8 steps, each stepping 8 at a time, their 128-bit
   states in three 52-bit limbs (the product mod 2**128 from nine multiply-adds), make 8
   outputs, 16 values, at once; Lemire's map and its rejection test for all 16 in two 32 x
   32-bit multiplies; only the counting is done value by value. The same stream as the scalar
   path (the tests compare both with numpy's): per 10^9 draws counted into 10^6 uint8 pairs,
   through Python (bench_draws.py's draws step), 1.93-2.23 s at load 1.4-2.8. The counting
   into a 1 MB row (in L2, not L1) is the cost: tried and dropped on the 2-core Intel Xeon (C
   harness, taskset -c 0, 8 rows a call, medians of 7-11, ns a draw, this loop 2.05-2.13): the
   row lines of the next 1-3 batches prefetched (T0 or for writing) 2.18-2.44; nibble counts
   (a 512 KB row) 2.09-2.49; 2 MB pages under the rows within noise; the moments of the
   previous 8 rows summed in this loop, 16 pairs every 8 batches (their FMAs under the
   counting's misses), 2.47 against 2.01 + 0.35 apart. */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx512ifma")
#define M52 ((((uint64_t)1) << 52) - 1)

typedef struct {
    __m512i s0, s1, s2;      /* each chain's state: bits 0-51, 52-103, 104-127 */
    __m512i a0, a1, a2;      /* 8 steps at once: state * a + c (a, c broadcast) */
    __m512i c0, c1, c2;
} vstream_t;

INLINE void limbs(u128 v, uint64_t *l) {
    l[0] = (uint64_t)v & M52;
    l[1] = (uint64_t)(v >> 52) & M52;
    l[2] = (uint64_t)(v >> 104);
}

static void vstream_init(vstream_t *g, u128 state, u128 inc) {
    uint64_t s[3][8] __attribute__((aligned(64))), l[3];
    u128 a, c, v = state;
    for (int j = 0; j < 8; j++) {  /* chain j first outputs the state j + 1 steps on */
        v = v * MULT + inc;
        limbs(v, l);
        for (int q = 0; q < 3; q++)
            s[q][j] = l[q];
    }
    g->s0 = _mm512_load_si512(s[0]);
    g->s1 = _mm512_load_si512(s[1]);
    g->s2 = _mm512_load_si512(s[2]);
    affine(8, inc, &a, &c);
    limbs(a, l);
    g->a0 = _mm512_set1_epi64((long long)l[0]);
    g->a1 = _mm512_set1_epi64((long long)l[1]);
    g->a2 = _mm512_set1_epi64((long long)l[2]);
    limbs(c, l);
    g->c0 = _mm512_set1_epi64((long long)l[0]);
    g->c1 = _mm512_set1_epi64((long long)l[1]);
    g->c2 = _mm512_set1_epi64((long long)l[2]);
}

/* the 8 chains' outputs (XSL-RR of each state), then each chain stepped 8 on */
INLINE __m512i vstream_next(vstream_t *g) {
    const __m512i m52 = _mm512_set1_epi64((long long)M52);
    __m512i lo = _mm512_or_si512(g->s0, _mm512_slli_epi64(g->s1, 52));
    __m512i hi = _mm512_or_si512(_mm512_srli_epi64(g->s1, 12), _mm512_slli_epi64(g->s2, 40));
    __m512i out = _mm512_rorv_epi64(_mm512_xor_si512(hi, lo), _mm512_srli_epi64(hi, 58));
    /* state * a + c mod 2**128, limb by limb: limb k gathers the low halves of the products of
       limbs i + j == k and the high halves of those of i + j == k - 1 */
    __m512i p0 = _mm512_madd52lo_epu64(g->c0, g->s0, g->a0);
    __m512i p1 = _mm512_madd52hi_epu64(g->c1, g->s0, g->a0);
    p1 = _mm512_madd52lo_epu64(p1, g->s0, g->a1);
    p1 = _mm512_madd52lo_epu64(p1, g->s1, g->a0);
    __m512i p2 = _mm512_madd52hi_epu64(g->c2, g->s0, g->a1);
    p2 = _mm512_madd52hi_epu64(p2, g->s1, g->a0);
    p2 = _mm512_madd52lo_epu64(p2, g->s0, g->a2);
    p2 = _mm512_madd52lo_epu64(p2, g->s1, g->a1);
    p2 = _mm512_madd52lo_epu64(p2, g->s2, g->a0);
    p1 = _mm512_add_epi64(p1, _mm512_srli_epi64(p0, 52));
    p2 = _mm512_add_epi64(p2, _mm512_srli_epi64(p1, 52));
    g->s0 = _mm512_and_si512(p0, m52);
    g->s1 = _mm512_and_si512(p1, m52);
    g->s2 = _mm512_and_si512(p2, _mm512_set1_epi64(((long long)1 << 24) - 1));
    return out;
}

/* row's k counts copied to out by streaming stores (past the caches: the moments read them once,
   later) and zeroed in place (row stays in L2 for the next row's counts); whether they sum to n
   (row_holds, in the same pass) */
INLINE int flush_row(uint8_t *out, uint8_t *row, size_t k, uint64_t n) {
    uint64_t total = 0;
    size_t i = 0;
    for (; i < k && ((uintptr_t)(out + i) & 63); i++) {
        total += row[i];
        out[i] = row[i];
        row[i] = 0;
    }
    __m512i acc = _mm512_setzero_si512();
    for (; i + 64 <= k; i += 64) {
        __m512i v = _mm512_loadu_si512((const void *)(row + i));
        acc = _mm512_add_epi64(acc, _mm512_sad_epu8(v, _mm512_setzero_si512()));
        _mm512_stream_si512((void *)(out + i), v);
        _mm512_storeu_si512((void *)(row + i), _mm512_setzero_si512());
    }
    total += (uint64_t)_mm512_reduce_add_epi64(acc);
    for (; i < k; i++) {
        total += row[i];
        out[i] = row[i];
        row[i] = 0;
    }
    return total == n;
}

/* count_rows for uint8 counts per pair, 2 <= n < 2**32: the same draws, the same counts, the
   same stream values used (the carried half first, as there). Every row is counted in the last
   row's place, zeroed once, and each before the last streamed out to its own place by
   flush_row: per 10^9 draws counted and their Pearson's moments summed (C harness, 8 rows a
   call, medians of 9, load 4), 2.42 ns against 2.50 for each row zeroed and counted in place
   (the same copy by ordinary stores: 2.60). */
static uint64_t count_rows_ifma(u128 state, u128 inc, int has_uint32, uint32_t uinteger,
                                uint64_t n, Py_ssize_t rows, uint8_t *out) {
    vstream_t g;
    vstream_init(&g, state, inc);
    const uint32_t thr = threshold(n);
    const __m512i nv = _mm512_set1_epi64((long long)n), tv = _mm512_set1_epi32((int)thr);
    uint32_t bins[16] __attribute__((aligned(64)));
    uint32_t rej = 0;          /* rejected values among bins[at .. 16) */
    int at = 16;               /* next value of bins to hand out */
    int carried = has_uint32;  /* numpy's kept half comes first */
    uint64_t used = 0;         /* stream values handed out, the carried one included */
    uint8_t *row = out + (size_t)(rows > 0 ? rows - 1 : 0) * (size_t)n;
    if (rows > 0)
        memset(row, 0, (size_t)n);
    for (Py_ssize_t r = 0; r < rows; r++) {
        uint64_t need = n;
        if (carried && need) {
            uint64_t m = (uint64_t)uinteger * n;
            used++;
            carried = 0;
            if (!rejected(m, thr)) {
                row[m >> 32]++;
                need--;
            }
        }
        while (need) {
            if (at == 16) {
                __m512i v = vstream_next(&g);
                __m512i even = _mm512_mul_epu32(v, nv);
                __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(v, 32), nv);
                /* value 2j: output j's low half (even's lane j); 2j + 1: its high half */
                _mm512_store_si512(bins, _mm512_mask_blend_epi32(
                    0xAAAA, _mm512_srli_epi64(even, 32), odd));
                rej = _mm512_cmplt_epu32_mask(
                    _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32)), tv);
                at = 0;
                if (LIKELY(rej == 0 && need >= 16)) {  /* all 16 counted, no test */
                    /* unrolled whatever the build's -O (Python's own flags: -O2 in some) */
#pragma GCC unroll 16
                    for (int i = 0; i < 16; i++)
                        row[bins[i]]++;
                    at = 16;
                    used += 16;
                    need -= 16;
                    continue;
                }
            }
            /* a row's last values, or a buffer with a rejection: one by one */
            used++;
            if (!((rej >> at) & 1)) {
                row[bins[at]]++;
                need--;
            }
            at++;
        }
        if (r + 1 < rows ? UNLIKELY(!flush_row(out + (size_t)r * (size_t)n, row, (size_t)n, n))
                         : UNLIKELY(!row_holds(row, (size_t)n, 1, n))) {
            _mm_sfence();
            return UINT64_MAX;
        }
    }
    _mm_sfence();  /* the streamed rows in place before the caller reads them */
    return used;
}
#pragma GCC pop_options
#endif

static int read_state(PyObject *args, const char *fmt, u128 *state, u128 *inc, int *has,
                      uint32_t *uinteger, unsigned long long *n, Py_buffer *b1, int *level,
                      PyObject **o1, Py_ssize_t *a1, Py_ssize_t *a2) {
    unsigned long long sh, sl, ih, il, ui;
    int h;
    int ok;
    if (o1 != NULL)
        ok = PyArg_ParseTuple(args, fmt, &sh, &sl, &ih, &il, &h, &ui, n, a1, b1, o1, a2, level);
    else
        ok = PyArg_ParseTuple(args, fmt, &sh, &sl, &ih, &il, &h, &ui, n, b1);
    if (!ok)
        return 0;
    *state = ((u128)sh << 64) | sl;
    *inc = ((u128)ih << 64) | il;
    *has = h != 0;
    *uinteger = (uint32_t)ui;
    if (*n < 1 || *n > ((unsigned long long)1 << 32)) {
        PyErr_SetString(PyExc_ValueError, "n must be in [1, 2**32]");
        return 0;
    }
    return 1;
}

static PyObject *state_tuple(u128 s, int has, uint32_t uinteger) {
    return Py_BuildValue("(KKiK)", (unsigned long long)(s >> 64), (unsigned long long)s, has,
                         (unsigned long long)uinteger);
}

INLINE size_t cell_at(const void *cells, int size, size_t i) {
    return size == 2 ? ((const uint16_t *)cells)[i] : ((const uint32_t *)cells)[i];
}

/* cells (NULL: none, then k must be n) holds n uint16 or uint32 cells, each below k: the
   counts are written through them */
static int cells_valid(const Py_buffer *cells, unsigned long long n, Py_ssize_t k) {
    if (cells == NULL) {
        if ((unsigned long long)k == n)
            return 1;
        PyErr_SetString(PyExc_ValueError, "without cell_of, k must be n");
        return 0;
    }
    int cs = (int)cells->itemsize;
    if ((cs != 2 && cs != 4) || (unsigned long long)cells->len != n * (unsigned long long)cs) {
        PyErr_SetString(PyExc_ValueError, "cell_of must hold n uint16 or uint32 cells");
        return 0;
    }
    size_t top = 0;
    for (size_t i = 0; i < (size_t)n; i++) {
        size_t c = cell_at(cells->buf, cs, i);
        top = c > top ? c : top;
    }
    if (top >= (size_t)k) {
        PyErr_SetString(PyExc_ValueError, "cell_of has a cell >= k");
        return 0;
    }
    return 1;
}

static const char count_doc[] =
    "count(state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger, n, rows, out, cell_of, k,"
    " level=2) -> (state_hi, state_lo, has_uint32, uinteger) or None\n\n"
    "Counts rows x n draws of numpy's PCG64 integers(0, n, dtype=uint32) per row into out "
    "(rows x k, uint8, uint16 or uint32), through cell_of (n uint16 or uint32 cells < k) when not "
    "None; returns the generator's state after the draws, or None when a count wrapped (count "
    "again, wider). level 2: uint8 counts per pair drawn in AVX-512 IFMA where the processor "
    "has it (count_level says which path that is); 0: the scalar path.";

/* The draws' path count takes, at most `level`: 2 AVX-512 with IFMA, 0 scalar */
static int count_level(int level) {
#ifdef DRAWS_IFMA
    __builtin_cpu_init();
    if (level >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512ifma"))
        return 2;
#endif
    (void)level;
    return 0;
}

static PyObject *draws_count(PyObject *self, PyObject *args) {
    u128 state, inc, fin;
    int has, fhas;
    uint32_t uinteger, fuint;
    unsigned long long n;
    Py_ssize_t rows, k;
    Py_buffer out, cells;
    PyObject *cell_obj;
    int level = 2;
    (void)self;
    if (!read_state(args, "KKKKiKKnw*On|i", &state, &inc, &has, &uinteger, &n, &out, &level,
                    &cell_obj, &rows, &k))
        return NULL;
    int has_cells = cell_obj != Py_None;
    PyObject *result = NULL;
    if (has_cells && PyObject_GetBuffer(cell_obj, &cells, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    int os = (int)out.itemsize, cs = has_cells ? (int)cells.itemsize : 0;
    if (rows < 0 || k < 1 || (os != 1 && os != 2 && os != 4) || out.len != rows * k * os ||
        !PyBuffer_IsContiguous(&out, 'C')) {
        PyErr_SetString(PyExc_ValueError, "out must be rows x k contiguous uint8, 16 or 32");
        goto done;
    }
    if (!cells_valid(has_cells ? &cells : NULL, n, k))
        goto done;
    if (n == 1) {  /* numpy draws nothing: every draw is 0 */
        size_t bin = has_cells ? cell_at(cells.buf, cs, 0) : 0;
        memset(out.buf, 0, (size_t)out.len);
        for (Py_ssize_t r = 0; r < rows; r++)
            bump((char *)out.buf + (size_t)r * (size_t)k * (size_t)os, bin, NULL, os, 0);
        result = state_tuple(state, has, uinteger);
        goto done;
    }
    {
        stream_t *g = PyMem_RawMalloc(sizeof(stream_t));
        uint64_t used;
        if (g == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        const void *cb = has_cells ? cells.buf : NULL;
        /* uint8 counts per pair, as resampling asks for them: AVX-512 IFMA where it runs */
        int vector = os == 1 && cs == 0 && n < ((unsigned long long)1 << 32) &&
                     count_level(level) == 2;
        Py_BEGIN_ALLOW_THREADS
        stream_init(g, state, inc, has, uinteger);
#define COUNT(o, c) count_rows(g, n, rows, out.buf, k, cb, o, c)
#ifdef DRAWS_IFMA
        if (vector)
            used = count_rows_ifma(state, inc, has, uinteger, n, rows, out.buf);
        else
#endif
        used = os == 1 ? (cs == 0 ? COUNT(1, 0) : cs == 2 ? COUNT(1, 2) : COUNT(1, 4))
             : os == 2 ? (cs == 0 ? COUNT(2, 0) : cs == 2 ? COUNT(2, 2) : COUNT(2, 4))
                       : (cs == 0 ? COUNT(4, 0) : cs == 2 ? COUNT(4, 2) : COUNT(4, 4));
#undef COUNT
        if (used != UINT64_MAX)
            stream_final(used, state, inc, has, uinteger, &fin, &fhas, &fuint);
        Py_END_ALLOW_THREADS
        PyMem_RawFree(g);
        if (used == UINT64_MAX) {
            result = Py_None;
            Py_INCREF(result);
        } else {
            result = state_tuple(fin, fhas, fuint);
        }
    }
done:
    PyBuffer_Release(&out);
    if (has_cells)
        PyBuffer_Release(&cells);
    return result;
}

static const char fill_doc[] =
    "fill(state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger, n, out)"
    " -> (state_hi, state_lo, has_uint32, uinteger)\n\n"
    "Fills out (uint32) with numpy's PCG64 integers(0, n, dtype=uint32) draws; returns the "
    "generator's state after them.";

static PyObject *draws_fill(PyObject *self, PyObject *args) {
    u128 state, inc, fin;
    int has, fhas;
    uint32_t uinteger, fuint;
    unsigned long long n;
    Py_buffer out;
    (void)self;
    if (!read_state(args, "KKKKiKKw*", &state, &inc, &has, &uinteger, &n, &out, NULL, NULL,
                    NULL, NULL))
        return NULL;
    if (out.itemsize != 4 || !PyBuffer_IsContiguous(&out, 'C')) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "out must be contiguous uint32");
        return NULL;
    }
    uint32_t *o = out.buf;
    size_t total = (size_t)(out.len / 4);
    if (n == 1) {
        memset(o, 0, (size_t)out.len);
        PyBuffer_Release(&out);
        return state_tuple(state, has, uinteger);
    }
    stream_t *g = PyMem_RawMalloc(sizeof(stream_t));
    if (g == NULL) {
        PyBuffer_Release(&out);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    const uint32_t thr = threshold(n);
    stream_init(g, state, inc, has, uinteger);
    size_t done = 0;
    while (done < total) {
        if (g->pos == g->len)
            stream_refill(g);
        uint64_t m = (uint64_t)g->buf[g->pos++] * n;
        if (!rejected(m, thr))
            o[done++] = (uint32_t)(m >> 32);
    }
    stream_final(g->base + g->pos, state, inc, has, uinteger, &fin, &fhas, &fuint);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(g);
    PyBuffer_Release(&out);
    return state_tuple(fin, fhas, fuint);
}

static const char reduce_doc[] =
    "reduce(counts, rows, n, cell_of, k, out)\n\n"
    "out (rows x k float64) = each row of counts (rows x n, uint8, uint16 or uint32) summed "
    "into the cells of cell_of (n uint16 or uint32 cells < k).";

/* rows summed in one pass over cell_of: their sums kept side by side per cell, so each pair
   adds its GROUP rows' counts into one cache line (not GROUP lines, far apart) */
#define GROUP 8
#ifndef AHEAD
#define AHEAD 16
#endif

INLINE void reduce_rows(const void *counts, Py_ssize_t rows, size_t n, const void *cell_of,
                        size_t k, double *out, uint32_t *acc, const int size, const int cs) {
    for (Py_ssize_t r0 = 0; r0 < rows; r0 += GROUP) {
        int g = rows - r0 < GROUP ? (int)(rows - r0) : GROUP;
        const char *first = (const char *)counts + (size_t)r0 * n * (size_t)size;
        memset(acc, 0, k * GROUP * sizeof(uint32_t));
        for (size_t i = 0; i < n; i++) {
            uint32_t *a = acc + cell_at(cell_of, cs, i) * GROUP;
            if (i + AHEAD < n)  /* the line a later pair adds into, fetched while this one adds */
                __builtin_prefetch(acc + cell_at(cell_of, cs, i + AHEAD) * GROUP, 1);
            for (int j = 0; j < g; j++) {
                const char *row = first + (size_t)j * n * (size_t)size;
                a[j] += size == 1 ? ((const uint8_t *)row)[i]
                      : size == 2 ? ((const uint16_t *)row)[i] : ((const uint32_t *)row)[i];
            }
        }
        for (int j = 0; j < g; j++)
            for (size_t c = 0; c < k; c++)
                out[(size_t)(r0 + j) * k + c] = acc[c * GROUP + (size_t)j];
    }
}

/* reduce_rows for uint8 counts into uint16 sums, half the cache of uint32 ones (104,736 cells
   x 8 rows: 1.7 MB, in L2); 1 when a sum wrapped (a cell drawn 65,536 times in a row: summed
   again in uint32) */
INLINE int reduce_rows16(const uint8_t *counts, Py_ssize_t rows, size_t n, const void *cell_of,
                         size_t k, double *out, uint16_t *acc, const int cs) {
    unsigned wrapped = 0;
    for (Py_ssize_t r0 = 0; r0 < rows; r0 += GROUP) {
        int g = rows - r0 < GROUP ? (int)(rows - r0) : GROUP;
        const uint8_t *first = counts + (size_t)r0 * n;
        memset(acc, 0, k * GROUP * sizeof(uint16_t));
        for (size_t i = 0; i < n; i++) {
            uint16_t *a = acc + cell_at(cell_of, cs, i) * GROUP;
            if (i + AHEAD < n)
                __builtin_prefetch(acc + cell_at(cell_of, cs, i + AHEAD) * GROUP, 1);
            for (int j = 0; j < g; j++) {
                uint16_t c = first[(size_t)j * n + i], v = (uint16_t)(a[j] + c);
                wrapped |= v < c;
                a[j] = v;
            }
        }
        if (wrapped)
            return 1;
        for (int j = 0; j < g; j++)
            for (size_t c = 0; c < k; c++)
                out[(size_t)(r0 + j) * k + c] = acc[c * GROUP + (size_t)j];
    }
    return 0;
}

static PyObject *draws_reduce(PyObject *self, PyObject *args) {
    Py_buffer counts, cells, out;
    Py_ssize_t rows, n, k;
    PyObject *result = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nny*nw*", &counts, &rows, &n, &cells, &k, &out))
        return NULL;
    int size = (int)counts.itemsize, cs = (int)cells.itemsize;
    if (rows < 0 || n < 1 || (size != 1 && size != 2 && size != 4) ||
        counts.len != rows * n * size || !PyBuffer_IsContiguous(&counts, 'C') ||
        out.itemsize != 8 || out.len != rows * k * 8 || !PyBuffer_IsContiguous(&out, 'C')) {
        PyErr_SetString(PyExc_ValueError, "counts must be rows x n uint8, 16 or 32, out rows x k "
                        "float64, both contiguous");
        goto done;
    }
    if (!cells_valid(&cells, (unsigned long long)n, k))
        goto done;
    /* a row's sums are at most n < 2**32 for any n drawn in uint32 */
    if ((unsigned long long)n > 0xFFFFFFFFULL) {
        PyErr_SetString(PyExc_ValueError, "n must be below 2**32");
        goto done;
    }
    uint32_t *acc = PyMem_RawMalloc((size_t)k * GROUP * sizeof(uint32_t));
    if (acc == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
#define REDUCE(s, c) reduce_rows(counts.buf, rows, (size_t)n, cells.buf, (size_t)k, out.buf, acc, s, c)
    int wrapped = 1;
    if (size == 1)
        wrapped = cs == 2 ? reduce_rows16(counts.buf, rows, (size_t)n, cells.buf, (size_t)k,
                                          out.buf, (uint16_t *)acc, 2)
                          : reduce_rows16(counts.buf, rows, (size_t)n, cells.buf, (size_t)k,
                                          out.buf, (uint16_t *)acc, 4);
    if (wrapped) {
        if (cs == 2)
            size == 1 ? REDUCE(1, 2) : size == 2 ? REDUCE(2, 2) : REDUCE(4, 2);
        else
            size == 1 ? REDUCE(1, 4) : size == 2 ? REDUCE(2, 4) : REDUCE(4, 4);
    }
#undef REDUCE
    Py_END_ALLOW_THREADS
    PyMem_RawFree(acc);
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&counts);
    PyBuffer_Release(&cells);
    PyBuffer_Release(&out);
    return result;
}

/* Count-weighted moments straight from the pair counts, without cells or a float count matrix:
   out[r] = (Σc, Σcx, Σcy, Σcx², Σcy², Σcxy) over row r's pairs. x and y stream from memory
   once per MOM_ROWS rows: a chunk of their five columns is made in L1 and every row of the
   block is summed over it, each in 8-lane partial sums (two sets, for independent chains),
   added into the row's totals chunk by chunk. The order differs from a BLAS product of cell
   counts: the figures agree to rounding (1e-12 relative, the tests' bound), not bit for bit.
   The confidence-weighted sums (Σcw, Σcwx, ...) are made the same way, alone or beside
   Pearson's in the same pass (MOM_BOTH: x, y, w and the counts stream from memory once for
   both; a chunk's counts, in L1, are summed twice). uint8 counts in the AVX-512 build take
   moments_blocks8_u8 instead (the columns made in registers, 8 rows at once; MOM_BOTH in two
   passes): see its comment. */
#define MOM_CHUNK 512
#define MOM_ROWS 16

/* what one call sums: Pearson's moments, the weighted ones, or both in one pass */
#define MOM_PLAIN 0
#define MOM_WEIGHTED 1
#define MOM_BOTH 2
/* how a chunk's counts meet its columns: times the plain columns; times the weighted ones
   (column 0 is w); times w first, then the plain ones (MOM_BOTH's weighted sums) */
#define KIND_PLAIN 0
#define KIND_WCOLS 1
#define KIND_TIMES_W 2

/* the vectors only pass between always-inlined functions: no call ABI is involved */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef double v8d __attribute__((vector_size(64)));
typedef double v4d __attribute__((vector_size(32)));
typedef uint8_t v8u8 __attribute__((vector_size(8)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));
typedef uint8_t v4u8 __attribute__((vector_size(4)));
typedef uint16_t v4u16 __attribute__((vector_size(8)));
typedef uint32_t v4u32 __attribute__((vector_size(16)));
typedef int32_t v8i32 __attribute__((vector_size(32)));
typedef int32_t v4i32 __attribute__((vector_size(16)));
typedef int64_t v8i64 __attribute__((vector_size(64)));
typedef int64_t v4i64 __attribute__((vector_size(32)));

INLINE double count_at(const void *row, size_t i, const int size) {
    return size == 1 ? ((const uint8_t *)row)[i]
         : size == 2 ? ((const uint16_t *)row)[i] : ((const uint32_t *)row)[i];
}

/* a chunk's columns, made per call (each call its own, on its stack: the GIL is released):
   x, y, x², y², xy in 1..5; MOM_WEIGHTED: w in 0 and each column times w (w·x·x as numpy's
   (w * xc) * xc); MOM_BOTH: w in 0 beside the plain columns */
#define MOM_COLS double mom_cols[6][MOM_CHUNK] __attribute__((aligned(64)))
INLINE void mom_fill(double (*mom_cols)[MOM_CHUNK], size_t c0, size_t m, const double *x,
                     const double *y, const double *w, const int mode) {
    for (size_t i = 0; i < m; i++) {
        double a = x[c0 + i], b = y[c0 + i];
        if (mode == MOM_WEIGHTED) {
            double v = w[c0 + i], va = v * a, vb = v * b;
            mom_cols[0][i] = v;
            mom_cols[1][i] = va;
            mom_cols[2][i] = vb;
            mom_cols[3][i] = va * a;
            mom_cols[4][i] = vb * b;
            mom_cols[5][i] = va * b;
        } else {
            if (mode == MOM_BOTH)
                mom_cols[0][i] = w[c0 + i];
            mom_cols[1][i] = a;
            mom_cols[2][i] = b;
            mom_cols[3][i] = a * a;
            mom_cols[4][i] = b * b;
            mom_cols[5][i] = a * b;
        }
    }
}

/* the pair step of a build without one (never called: PAIRED is 0) */
static void chunk_unpaired(const char *counts, size_t stride, size_t m,
                           double (*mom_cols)[MOM_CHUNK], double (*t)[6], int size, int kind) {
    (void)counts, (void)stride, (void)m, (void)mom_cols, (void)t, (void)size, (void)kind;
}

/* The rows x n counts summed by a build's CHUNK (one row's m counts over a chunk's columns
   into t[6], as KIND says): x, y (and w) stream once per MOM_ROWS rows; out gets the sums
   MOM_PLAIN or MOM_WEIGHTED name, MOM_BOTH Pearson's in out and the weighted ones in wout.
   MOM_DRIVER_PAIRS: a build whose PAIR sums two rows at once, each as CHUNK would alone. */
#define MOM_DRIVER(NAME, CHUNK, ATTR) MOM_DRIVER_PAIRS(NAME, CHUNK, chunk_unpaired, 0, ATTR)
#define MOM_DRIVER_PAIRS(NAME, CHUNK, PAIR, PAIRED, ATTR)                                        \
ATTR INLINE void NAME(const void *counts, Py_ssize_t rows, size_t n, const double *x,            \
                      const double *y, const double *w, double *out, double *wout,               \
                      const int size, const int mode) {                                          \
    MOM_COLS;                                                                                    \
    for (Py_ssize_t r0 = 0; r0 < rows; r0 += MOM_ROWS) {                                         \
        int g = rows - r0 < MOM_ROWS ? (int)(rows - r0) : MOM_ROWS;                              \
        double tot[MOM_ROWS][6], wtot[MOM_ROWS][6];                                              \
        memset(tot, 0, sizeof tot);                                                              \
        memset(wtot, 0, sizeof wtot);                                                            \
        for (size_t c0 = 0; c0 < n; c0 += MOM_CHUNK) {                                           \
            size_t m = n - c0 < MOM_CHUNK ? n - c0 : MOM_CHUNK;                                  \
            mom_fill(mom_cols, c0, m, x, y, w, mode);                                            \
            for (int j = 0; j < g; j++) {                                                        \
                const char *row = (const char *)counts + ((size_t)(r0 + j) * n + c0) * (size_t)size; \
                double t[6];                                                                     \
                if (PAIRED && j + 1 < g) {                                                       \
                    double tt[2][6];                                                             \
                    PAIR(row, n * (size_t)size, m, mom_cols, tt, size,                           \
                         mode == MOM_WEIGHTED ? KIND_WCOLS : KIND_PLAIN);                        \
                    for (int q = 0; q < 6; q++) {                                                \
                        tot[j][q] += tt[0][q];                                                   \
                        tot[j + 1][q] += tt[1][q];                                               \
                    }                                                                            \
                    if (mode == MOM_BOTH) {                                                      \
                        PAIR(row, n * (size_t)size, m, mom_cols, tt, size, KIND_TIMES_W);        \
                        for (int q = 0; q < 6; q++) {                                            \
                            wtot[j][q] += tt[0][q];                                              \
                            wtot[j + 1][q] += tt[1][q];                                          \
                        }                                                                        \
                    }                                                                            \
                    j++;                                                                         \
                    continue;                                                                    \
                }                                                                                \
                CHUNK(row, m, mom_cols, t, size, mode == MOM_WEIGHTED ? KIND_WCOLS : KIND_PLAIN); \
                for (int q = 0; q < 6; q++)                                                      \
                    tot[j][q] += t[q];                                                           \
                if (mode == MOM_BOTH) {                                                          \
                    CHUNK(row, m, mom_cols, t, size, KIND_TIMES_W);                              \
                    for (int q = 0; q < 6; q++)                                                  \
                        wtot[j][q] += t[q];                                                      \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        memcpy(out + (size_t)r0 * 6, tot, (size_t)g * 6 * sizeof(double));                      \
        if (mode == MOM_BOTH)                                                                    \
            memcpy(wout + (size_t)r0 * 6, wtot, (size_t)g * 6 * sizeof(double));                 \
    }                                                                                            \
}

/* the chunk sums in GCC's vectors of VT (VW lanes, counts loaded as CT8/CT16/CT32), two sets
   of partial sums; any count width */
#define MOMENTS_CHUNK(NAME, VT, VW, CT8, CT16, CT32, IT32, IT64)                                 \
INLINE VT NAME##_load(const void *row, size_t i, const int size) {                               \
    if (size == 1) {                                                                             \
        CT8 v;                                                                                   \
        memcpy(&v, (const uint8_t *)row + i, sizeof v);                                          \
        return __builtin_convertvector(__builtin_convertvector(v, IT32), VT);                    \
    }                                                                                            \
    if (size == 2) {                                                                             \
        CT16 v;                                                                                  \
        memcpy(&v, (const uint16_t *)row + i, sizeof v);                                         \
        return __builtin_convertvector(__builtin_convertvector(v, IT32), VT);                    \
    }                                                                                            \
    CT32 v;                                                                                      \
    memcpy(&v, (const uint32_t *)row + i, sizeof v);                                             \
    return __builtin_convertvector(__builtin_convertvector(v, IT64), VT);                        \
}                                                                                                \
INLINE double NAME##_hsum(const VT *v) {                                                         \
    double t = 0;                                                                                \
    for (int l = 0; l < VW; l++)                                                                 \
        t += (*v)[l];                                                                            \
    return t;                                                                                    \
}                                                                                                \
INLINE void NAME(const char *row, size_t m, double (*mom_cols)[MOM_CHUNK], double *t,            \
                 const int size, const int kind) {                                               \
    size_t mv = m - m % (2 * VW);                                                                \
    VT n0 = {0}, x0 = {0}, y0 = {0}, xx0 = {0}, yy0 = {0}, xy0 = {0};                            \
    VT n1 = {0}, x1 = {0}, y1 = {0}, xx1 = {0}, yy1 = {0}, xy1 = {0};                            \
    for (size_t i = 0; i < mv; i += 2 * VW) {                                                    \
        VT c = NAME##_load(row, i, size), d = NAME##_load(row, i + VW, size);                    \
        if (kind == KIND_TIMES_W) {                                                              \
            c *= *(const VT *)(mom_cols[0] + i);                                                 \
            d *= *(const VT *)(mom_cols[0] + i + VW);                                            \
        }                                                                                        \
        n0 += kind == KIND_WCOLS ? c * *(const VT *)(mom_cols[0] + i) : c;                       \
        n1 += kind == KIND_WCOLS ? d * *(const VT *)(mom_cols[0] + i + VW) : d;                  \
        x0 += c * *(const VT *)(mom_cols[1] + i);                                                \
        x1 += d * *(const VT *)(mom_cols[1] + i + VW);                                           \
        y0 += c * *(const VT *)(mom_cols[2] + i);                                                \
        y1 += d * *(const VT *)(mom_cols[2] + i + VW);                                           \
        xx0 += c * *(const VT *)(mom_cols[3] + i);                                               \
        xx1 += d * *(const VT *)(mom_cols[3] + i + VW);                                          \
        yy0 += c * *(const VT *)(mom_cols[4] + i);                                               \
        yy1 += d * *(const VT *)(mom_cols[4] + i + VW);                                          \
        xy0 += c * *(const VT *)(mom_cols[5] + i);                                               \
        xy1 += d * *(const VT *)(mom_cols[5] + i + VW);                                          \
    }                                                                                            \
    VT sums[6] = {n0 + n1, x0 + x1, y0 + y1, xx0 + xx1, yy0 + yy1, xy0 + xy1};                  \
    for (int q = 0; q < 6; q++)                                                                  \
        t[q] = NAME##_hsum(&sums[q]);                                                            \
    for (size_t i = mv; i < m; i++) {                                                            \
        double c = count_at(row, i, size);                                                       \
        if (kind == KIND_TIMES_W)                                                                \
            c *= mom_cols[0][i];                                                                 \
        t[0] = kind == KIND_WCOLS ? MADD(c, mom_cols[0][i], t[0]) : t[0] + c;                    \
        for (int q = 0; q < 5; q++)                                                              \
            t[q + 1] = MADD(c, mom_cols[q + 1][i], t[q + 1]);                                    \
    }                                                                                            \
}

/* a build's dispatch to its drivers, each count width and mode a specialised copy */
#define MOM_DISPATCH(NAME, U8, ANY, ATTR)                                                        \
ATTR static void NAME(const void *counts, Py_ssize_t rows, size_t n, const double *x,            \
                      const double *y, const double *w, double *out, double *wout, int size,     \
                      int mode) {                                                                \
    if (size == 1)                                                                               \
        mode == MOM_PLAIN ? U8(counts, rows, n, x, y, w, out, wout, 1, MOM_PLAIN)                \
        : mode == MOM_WEIGHTED ? U8(counts, rows, n, x, y, w, out, wout, 1, MOM_WEIGHTED)        \
                               : U8(counts, rows, n, x, y, w, out, wout, 1, MOM_BOTH);           \
    else if (size == 2)                                                                          \
        mode == MOM_PLAIN ? ANY(counts, rows, n, x, y, w, out, wout, 2, MOM_PLAIN)               \
        : mode == MOM_WEIGHTED ? ANY(counts, rows, n, x, y, w, out, wout, 2, MOM_WEIGHTED)       \
                               : ANY(counts, rows, n, x, y, w, out, wout, 2, MOM_BOTH);          \
    else                                                                                         \
        mode == MOM_PLAIN ? ANY(counts, rows, n, x, y, w, out, wout, 4, MOM_PLAIN)               \
        : mode == MOM_WEIGHTED ? ANY(counts, rows, n, x, y, w, out, wout, 4, MOM_WEIGHTED)       \
                               : ANY(counts, rows, n, x, y, w, out, wout, 4, MOM_BOTH);          \
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define MOM_AVX512 1
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,fma")
/* a*b + c in the tails: one rounding where the build has FMA, written out so that every copy
   of a tail (each mode's) rounds alike, whatever GCC would contract */
#define MADD(a, b, c) __builtin_fma(a, b, c)
MOMENTS_CHUNK(chunk8, v8d, 8, v8u8, v8u16, v8u32, v8i32, v8i64)

MOM_DRIVER(moments_rows8, chunk8, )

/* The sums of uint8 counts in AVX-512 intrinsics, G rows (up to PLAIN_ROWS) at once over one
   block of pairs, 16 pairs a step: the step's columns made in registers from x and y (and w)
   once for the G rows, each row's 16 counts looked up in a table of their doubles (shuffles,
   off the FMAs' port; converted when one is 16 or more) and its sums taken by FMAs, one set
   of partial sums a row, added into the row's totals (tot) at the block's end. Pearson's Σc
   is summed in integers (psadbw) over the block's bytes, still in L1; W: the weighted sums,
   column 0 w, the others times w (as numpy's (w * xc) * xc). The FMAs' port is the bound (the
   2-core Intel Xeon of benchmarks/README.md behaves as one 512-bit FMA a cycle): 10 of its
   uops per 16 counts (12 weighted) and the columns' products shared by 8 rows. Each row's sums
   are made by the same operations in the same order whatever G is and whichever rows are
   beside it (bit for bit a row alone). Before: chunk8 over a chunk of 512 columns made in L1
   (mom_fill) two rows at a time, the columns loaded again for each pair of rows. */
#define PLAIN_ROWS 8
#define PLAIN_BLOCK 512
INLINE void plain8_block(const uint8_t *counts, size_t n, const double *x, const double *y,
                         const double *w, size_t b0, size_t b1, __m512d (*tot)[6],
                         uint64_t *whole, const int G, const int W) {
    const __m512d low = _mm512_setr_pd(0, 1, 2, 3, 4, 5, 6, 7);
    const __m512d high = _mm512_setr_pd(8, 9, 10, 11, 12, 13, 14, 15);
    const int NC = W ? 6 : 5;  /* the weighted ones: w first, then each column times w */
    __m512d s[PLAIN_ROWS][6];
    for (int r = 0; r < G; r++)
        for (int q = 0; q < NC; q++)
            s[r][q] = _mm512_setzero_pd();
    for (size_t i = b0; i < b1; i += 16) {
        __m512d xa = _mm512_loadu_pd(x + i), xb = _mm512_loadu_pd(x + i + 8);
        __m512d ya = _mm512_loadu_pd(y + i), yb = _mm512_loadu_pd(y + i + 8);
        __m512d ca[6], cb[6];
        if (W) {  /* as numpy's (w * xc) * xc */
            __m512d wa = _mm512_loadu_pd(w + i), wb = _mm512_loadu_pd(w + i + 8);
            __m512d wxa = _mm512_mul_pd(wa, xa), wya = _mm512_mul_pd(wa, ya);
            __m512d wxb = _mm512_mul_pd(wb, xb), wyb = _mm512_mul_pd(wb, yb);
            ca[0] = wa, ca[1] = wxa, ca[2] = wya, ca[3] = _mm512_mul_pd(wxa, xa);
            ca[4] = _mm512_mul_pd(wya, ya), ca[5] = _mm512_mul_pd(wxa, ya);
            cb[0] = wb, cb[1] = wxb, cb[2] = wyb, cb[3] = _mm512_mul_pd(wxb, xb);
            cb[4] = _mm512_mul_pd(wyb, yb), cb[5] = _mm512_mul_pd(wxb, yb);
        } else {
            ca[0] = xa, ca[1] = ya, ca[2] = _mm512_mul_pd(xa, xa), ca[3] = _mm512_mul_pd(ya, ya);
            ca[4] = _mm512_mul_pd(xa, ya);
            cb[0] = xb, cb[1] = yb, cb[2] = _mm512_mul_pd(xb, xb), cb[3] = _mm512_mul_pd(yb, yb);
            cb[4] = _mm512_mul_pd(xb, yb);
        }
#pragma GCC unroll 8
        for (int r = 0; r < G; r++) {
            const uint8_t *at = counts + (size_t)r * n + i;
            __m512d c, d;
            __m128i b16 = _mm_loadu_si128((const __m128i *)at);
            if (LIKELY(!_mm_test_epi8_mask(b16, _mm_set1_epi8((char)0xF0)))) {
                c = _mm512_permutex2var_pd(low, _mm512_cvtepu8_epi64(b16), high);
                d = _mm512_permutex2var_pd(low, _mm512_cvtepu8_epi64(_mm_srli_si128(b16, 8)),
                                           high);
            } else {
                c = _mm512_cvtepi32_pd(_mm256_cvtepu8_epi32(b16));
                d = _mm512_cvtepi32_pd(_mm256_cvtepu8_epi32(_mm_srli_si128(b16, 8)));
            }
#pragma GCC unroll 6
            for (int q = 0; q < NC; q++)
                s[r][q] = _mm512_fmadd_pd(d, cb[q], _mm512_fmadd_pd(c, ca[q], s[r][q]));
        }
    }
    for (int r = 0; r < G; r++) {
        for (int q = 0; q < NC; q++)
            tot[r][q] = _mm512_add_pd(tot[r][q], s[r][q]);
        if (W)
            continue;
        const uint8_t *row = counts + (size_t)r * n;
        __m512i wide = _mm512_setzero_si512();
        size_t i = b0;
        for (; i + 64 <= b1; i += 64)
            wide = _mm512_add_epi64(wide, _mm512_sad_epu8(
                _mm512_loadu_si512((const void *)(row + i)), _mm512_setzero_si512()));
        __m128i acc = _mm_setzero_si128();
        for (; i < b1; i += 16)
            acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(row + i)),
                                                  _mm_setzero_si128()));
        whole[r] += (uint64_t)_mm512_reduce_add_epi64(wide) + (uint64_t)_mm_cvtsi128_si64(acc) +
                    (uint64_t)_mm_extract_epi64(acc, 1);
    }
}

/* plain8_block over every block, PLAIN_SPAN rows a pass: each block's x and y (and w) read
   from memory once for all of them, then from L1 for each group of PLAIN_ROWS. Per 10^9
   counts, 8 rows of 10^6 pairs a call as score_run asks, the rows just counted (C harness
   over this file's moments_avx512, 2-core Intel Xeon, taskset -c 0, load 3-4, medians of 4;
   the first figure 8d95eaf's, chunk8 two rows at a time): Pearson's 0.56 -> 0.36 s, the
   weighted ones 0.62 -> 0.43 s, both 1.05 -> 0.79 s (two passes: one of both by chunk8 took
   more); 16 rows a call, Pearson's 0.49 -> 0.38 s. */
#define PLAIN_SPAN 64
INLINE void moments_blocks8_u8(const uint8_t *counts, Py_ssize_t rows, size_t n, const double *x,
                               const double *y, const double *w, double *out, const int W) {
    __m512d tot[PLAIN_SPAN][6];
    uint64_t whole[PLAIN_SPAN];
    size_t nv = n - n % 16;
    for (Py_ssize_t r0 = 0; r0 < rows; r0 += PLAIN_SPAN) {
        int span = rows - r0 < PLAIN_SPAN ? (int)(rows - r0) : PLAIN_SPAN;
        const uint8_t *first = counts + (size_t)r0 * n;
        for (int r = 0; r < span; r++) {
            whole[r] = 0;
            for (int q = 0; q < 6; q++)
                tot[r][q] = _mm512_setzero_pd();
        }
        for (size_t b0 = 0; b0 < nv; b0 += PLAIN_BLOCK) {
            size_t b1 = nv - b0 < PLAIN_BLOCK ? nv : b0 + PLAIN_BLOCK;
            int r = 0;
            for (; r + 8 <= span; r += 8)
                plain8_block(first + (size_t)r * n, n, x, y, w, b0, b1, tot + r, whole + r, 8, W);
            for (; r + 4 <= span; r += 4)
                plain8_block(first + (size_t)r * n, n, x, y, w, b0, b1, tot + r, whole + r, 4, W);
            for (; r < span; r++)
                plain8_block(first + (size_t)r * n, n, x, y, w, b0, b1, tot + r, whole + r, 1, W);
        }
        for (int r = 0; r < span; r++) {
            const uint8_t *row = first + (size_t)r * n;
            double *t = out + (size_t)(r0 + r) * 6;
            if (W) {
                for (int q = 0; q < 6; q++)
                    t[q] = _mm512_reduce_add_pd(tot[r][q]);
                for (size_t i = nv; i < n; i++) {
                    double c = row[i], v = w[i], va = v * x[i], vb = v * y[i];
                    t[0] = MADD(c, v, t[0]);
                    t[1] = MADD(c, va, t[1]);
                    t[2] = MADD(c, vb, t[2]);
                    t[3] = MADD(c, va * x[i], t[3]);
                    t[4] = MADD(c, vb * y[i], t[4]);
                    t[5] = MADD(c, va * y[i], t[5]);
                }
                continue;
            }
            for (int q = 0; q < 5; q++)
                t[q + 1] = _mm512_reduce_add_pd(tot[r][q]);
            for (size_t i = nv; i < n; i++) {
                double c = row[i], a = x[i], b = y[i];
                whole[r] += row[i];
                t[1] = MADD(c, a, t[1]);
                t[2] = MADD(c, b, t[2]);
                t[3] = MADD(c, a * a, t[3]);
                t[4] = MADD(c, b * b, t[4]);
                t[5] = MADD(c, a * b, t[5]);
            }
            t[0] = (double)whole[r];
        }
    }
}

/* uint8 counts: Pearson's sums and the weighted ones by moments_blocks8_u8 (MOM_BOTH: the two
   in turn, two passes over the counts; Pearson's sums the very bits moments gives) */
static void moments_rows8_u8_any(const void *counts, Py_ssize_t rows, size_t n, const double *x,
                                 const double *y, const double *w, double *out, double *wout,
                                 const int size, const int mode) {
    (void)size;
    if (mode != MOM_WEIGHTED)
        moments_blocks8_u8(counts, rows, n, x, y, NULL, out, 0);
    if (mode == MOM_WEIGHTED)
        moments_blocks8_u8(counts, rows, n, x, y, w, out, 1);
    else if (mode == MOM_BOTH)
        moments_blocks8_u8(counts, rows, n, x, y, w, wout, 1);
}
MOM_DISPATCH(moments_avx512, moments_rows8_u8_any, moments_rows8, )
#undef MADD
#pragma GCC pop_options
#endif

/* the plain build: no FMA (x86-64's baseline has none), two roundings */
#define MADD(a, b, c) ((a) * (b) + (c))
MOMENTS_CHUNK(chunk4, v4d, 4, v4u8, v4u16, v4u32, v4i32, v4i64)
MOM_DRIVER(moments_rows, chunk4, )
MOM_DISPATCH(moments_plain, moments_rows, moments_rows, )

#undef MADD

#ifdef MOM_AVX512
#define MADD(a, b, c) __builtin_fma(a, b, c)
#define AVX2 __attribute__((target("avx,avx2,fma")))
/* chunk4 for uint8 counts in AVX2 intrinsics (processors without AVX-512): 4 counts widened to
   doubles, two sets of six partial sums */
AVX2 INLINE void chunk4_u8(const char *counts, size_t m, double (*mom_cols)[MOM_CHUNK], double *t,
                           const int size, const int kind) {
    const uint8_t *row = (const uint8_t *)counts;
    size_t mv = m - m % 8;
    __m256d s0[6], s1[6];
    (void)size;
    for (int q = 0; q < 6; q++)
        s0[q] = s1[q] = _mm256_setzero_pd();
    for (size_t i = 0; i < mv; i += 8) {
        __m128i b8 = _mm_loadl_epi64((const __m128i *)(row + i));
        __m256d c = _mm256_cvtepi32_pd(_mm_cvtepu8_epi32(b8));
        __m256d d = _mm256_cvtepi32_pd(_mm_cvtepu8_epi32(_mm_srli_si128(b8, 4)));
        if (kind == KIND_TIMES_W) {
            c = _mm256_mul_pd(c, _mm256_load_pd(mom_cols[0] + i));
            d = _mm256_mul_pd(d, _mm256_load_pd(mom_cols[0] + i + 4));
        }
        if (kind == KIND_WCOLS) {
            s0[0] = _mm256_fmadd_pd(c, _mm256_load_pd(mom_cols[0] + i), s0[0]);
            s1[0] = _mm256_fmadd_pd(d, _mm256_load_pd(mom_cols[0] + i + 4), s1[0]);
        } else {
            s0[0] = _mm256_add_pd(s0[0], c);
            s1[0] = _mm256_add_pd(s1[0], d);
        }
        for (int q = 0; q < 5; q++) {
            s0[q + 1] = _mm256_fmadd_pd(c, _mm256_load_pd(mom_cols[q + 1] + i), s0[q + 1]);
            s1[q + 1] = _mm256_fmadd_pd(d, _mm256_load_pd(mom_cols[q + 1] + i + 4), s1[q + 1]);
        }
    }
    for (int q = 0; q < 6; q++) {
        double lanes[4];
        _mm256_storeu_pd(lanes, _mm256_add_pd(s0[q], s1[q]));
        t[q] = ((lanes[0] + lanes[1]) + lanes[2]) + lanes[3];
    }
    for (size_t i = mv; i < m; i++) {
        double c = row[i];
        if (kind == KIND_TIMES_W)
            c *= mom_cols[0][i];
        t[0] = kind == KIND_WCOLS ? MADD(c, mom_cols[0][i], t[0]) : t[0] + c;
        for (int q = 0; q < 5; q++)
            t[q + 1] = MADD(c, mom_cols[q + 1][i], t[q + 1]);
    }
}

MOM_DRIVER(moments_rows4_u8_of, chunk4_u8, AVX2)
#undef MADD

/* uint8 counts only: wider ones take the plain build */
AVX2 static void moments_rows4_u8(const uint8_t *counts, Py_ssize_t rows, size_t n,
                                  const double *x, const double *y, const double *w, double *out,
                                  double *wout, int mode) {
    mode == MOM_PLAIN ? moments_rows4_u8_of(counts, rows, n, x, y, w, out, wout, 1, MOM_PLAIN)
    : mode == MOM_WEIGHTED ? moments_rows4_u8_of(counts, rows, n, x, y, w, out, wout, 1,
                                                 MOM_WEIGHTED)
                           : moments_rows4_u8_of(counts, rows, n, x, y, w, out, wout, 1,
                                                 MOM_BOTH);
}
#endif

/* The best build of the moments this processor runs, at most `level`: 2 AVX-512, 1 AVX2 with
   FMA (uint8 counts; wider ones take the plain build), 0 the plain one (each is tested:
   _draws.moments takes the level) */
static int moments_level(int level) {
#ifdef MOM_AVX512
    __builtin_cpu_init();
    if (level >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return 2;
    if (level >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
#endif
    (void)level;
    return 0;
}

static const char moments_doc[] =
    "moments(counts, rows, n, x, y, out, level=2) -> int\n\n"
    "out (rows x 6 float64) = each row of counts (rows x n, uint8, uint16 or uint32) times the "
    "columns 1, x, y, x*x, y*y, x*y (x, y: n float64), by the best build the processor runs up to "
    "level (2 AVX-512, 1 AVX2, 0 plain C); returns the level that ran.";

static const char weighted_moments_doc[] =
    "weighted_moments(counts, rows, n, x, y, w, out, level=2) -> int\n\n"
    "As moments, with every column times w (n float64): out (rows x 6) = each row of counts "
    "times w, w*x, w*y, w*x*x, w*y*y, w*x*y; returns the level that ran.";

static const char both_moments_doc[] =
    "both_moments(counts, rows, n, x, y, w, out, wout, level=2) -> int\n\n"
    "moments into out and weighted_moments into wout (rows x 6 float64 each) in one pass over "
    "the counts, x, y and w; returns the level that ran.";

/* moments, weighted_moments and both_moments: one parser, one set of builds */
static PyObject *moments_call(PyObject *args, int mode) {
    Py_buffer counts, xb, yb, wb, out, wout;
    Py_ssize_t rows, n;
    int level = 2;
    PyObject *result = NULL;
    int ok = mode == MOM_BOTH
        ? PyArg_ParseTuple(args, "y*nny*y*y*w*w*|i", &counts, &rows, &n, &xb, &yb, &wb, &out,
                           &wout, &level)
        : mode == MOM_WEIGHTED
        ? PyArg_ParseTuple(args, "y*nny*y*y*w*|i", &counts, &rows, &n, &xb, &yb, &wb, &out,
                           &level)
        : PyArg_ParseTuple(args, "y*nny*y*w*|i", &counts, &rows, &n, &xb, &yb, &out, &level);
    if (!ok)
        return NULL;
    if (mode == MOM_PLAIN)
        wb = xb;  /* checked as x is, never read */
    if (mode != MOM_BOTH)
        wout = out;  /* checked as out is, never written */
    int size = (int)counts.itemsize;
    if (rows < 0 || n < 1 || (size != 1 && size != 2 && size != 4) ||
        counts.len != rows * n * size || !PyBuffer_IsContiguous(&counts, 'C') ||
        xb.itemsize != 8 || xb.len != n * 8 || !PyBuffer_IsContiguous(&xb, 'C') ||
        yb.itemsize != 8 || yb.len != n * 8 || !PyBuffer_IsContiguous(&yb, 'C') ||
        wb.itemsize != 8 || wb.len != n * 8 || !PyBuffer_IsContiguous(&wb, 'C') ||
        out.itemsize != 8 || out.len != rows * 6 * 8 || !PyBuffer_IsContiguous(&out, 'C') ||
        wout.itemsize != 8 || wout.len != rows * 6 * 8 || !PyBuffer_IsContiguous(&wout, 'C') ||
        (mode == MOM_BOTH && wout.buf == out.buf)) {
        PyErr_SetString(PyExc_ValueError, "counts must be rows x n uint8, 16 or 32, x, y (and w) "
                        "n float64, out (and wout, another array) rows x 6 float64, all "
                        "contiguous");
        goto done;
    }
    level = moments_level(level);
    const double *w = mode == MOM_PLAIN ? NULL : wb.buf;
    Py_BEGIN_ALLOW_THREADS
#ifdef MOM_AVX512
    if (level == 2)
        moments_avx512(counts.buf, rows, (size_t)n, xb.buf, yb.buf, w, out.buf, wout.buf, size,
                       mode);
    else if (level == 1 && size == 1)
        moments_rows4_u8(counts.buf, rows, (size_t)n, xb.buf, yb.buf, w, out.buf, wout.buf,
                         mode);
    else
#endif
        moments_plain(counts.buf, rows, (size_t)n, xb.buf, yb.buf, w, out.buf, wout.buf, size,
                      mode);
    Py_END_ALLOW_THREADS
    result = PyLong_FromLong(level);
done:
    PyBuffer_Release(&counts);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&yb);
    if (mode != MOM_PLAIN)
        PyBuffer_Release(&wb);
    PyBuffer_Release(&out);
    if (mode == MOM_BOTH)
        PyBuffer_Release(&wout);
    return result;
}

static const char builds_doc[] =
    "builds() -> (draws, moments)\n\n"
    "The builds this processor runs: the draws' (2 AVX-512 with IFMA, 0 scalar) and the "
    "moments' (2 AVX-512, 1 AVX2, 0 plain C).";

static PyObject *draws_builds(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return Py_BuildValue("(ii)", count_level(2), moments_level(2));
}

static PyObject *draws_moments(PyObject *self, PyObject *args) {
    (void)self;
    return moments_call(args, MOM_PLAIN);
}

static PyObject *draws_weighted_moments(PyObject *self, PyObject *args) {
    (void)self;
    return moments_call(args, MOM_WEIGHTED);
}

static PyObject *draws_both_moments(PyObject *self, PyObject *args) {
    (void)self;
    return moments_call(args, MOM_BOTH);
}

static PyMethodDef methods[] = {
    {"count", draws_count, METH_VARARGS, count_doc},
    {"fill", draws_fill, METH_VARARGS, fill_doc},
    {"reduce", draws_reduce, METH_VARARGS, reduce_doc},
    {"moments", draws_moments, METH_VARARGS, moments_doc},
    {"weighted_moments", draws_weighted_moments, METH_VARARGS, weighted_moments_doc},
    {"both_moments", draws_both_moments, METH_VARARGS, both_moments_doc},
    {"builds", draws_builds, METH_NOARGS, builds_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_draws",
    "numpy's PCG64 bounded uint32 draws, counted as they are drawn (see resampling.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__draws(void) { return PyModule_Create(&module); }
