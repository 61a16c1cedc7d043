"""C source shared by the kernel's parts (:mod:`hetero_ns3.network.analytic.kernel_c` puts it first).

Types, the two priority queues of the event loop (task events; drain times of active flows) and the
path figures (latency and ideal FCT of a flow on a path row, in numpy's summation order), which the
event loop and ``flowsim_path_stats`` both use.
"""

COMMON_SOURCE = r"""
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef long long i64;
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif
typedef struct { double t; i64 code; } Ev;
typedef struct { Ev *a; i64 n, cap; } Heap;

static int ev_less(Ev x, Ev y) { return x.t < y.t || (x.t == y.t && x.code < y.code); }

/* Task events in a 4-ary min-heap on (time, code): half the levels of a binary heap, and the four
   children of a node are adjacent in memory. (time, code) pairs are unique, so the pop order is the
   same as any other exact priority queue's. */
static int heap_push(Heap *h, double t, i64 code) {
    if (h->n == h->cap) {
        i64 nc = h->cap ? 2 * h->cap : 4096;
        Ev *na = (Ev *)realloc(h->a, (size_t)nc * sizeof(Ev));
        if (!na) return -1;
        h->a = na;
        h->cap = nc;
    }
    Ev e = {t, code};
    i64 i = h->n++;
    while (i > 0) {
        i64 p = (i - 1) / 4;
        if (!ev_less(e, h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
    return 0;
}

/* The (time, code) order as one unsigned 128-bit key: event times are > 0 (starts are released at
   times > 0, and later events add positive durations), and the bits of a positive double order as
   its value; flipping the sign bit of the code orders it as a signed integer. So key(x) < key(y)
   exactly when ev_less(x, y), and the children of a node are compared without branches. */
#ifdef __SIZEOF_INT128__
typedef unsigned __int128 EvKey;
static EvKey ev_key(Ev e) {
    unsigned long long b;
    memcpy(&b, &e.t, sizeof b);
    return ((EvKey)b << 64) | ((unsigned long long)e.code ^ 0x8000000000000000ULL);
}
#define KEY_LESS(x, y) ((x) < (y))
#else /* no 128-bit integers: compare the pairs */
typedef Ev EvKey;
static EvKey ev_key(Ev e) { return e; }
#define KEY_LESS(x, y) ev_less(x, y)
#endif

static Ev heap_pop(Heap *h) {
    Ev top = h->a[0];
    Ev last = h->a[--h->n];
    i64 i = 0, n = h->n;
    if (n == 0) return top;
    const EvKey kl = ev_key(last);
    for (;;) {
        i64 c = 4 * i + 1;
        if (c >= n) break;
        i64 end = c + 4 < n ? c + 4 : n, m = c;
        EvKey km = ev_key(h->a[c]);
        for (i64 k = c + 1; k < end; k++) {
            EvKey kk = ev_key(h->a[k]);
            int lt = KEY_LESS(kk, km);
            m = lt ? k : m;
            km = lt ? kk : km;
        }
        if (!KEY_LESS(km, kl)) break;
        h->a[i] = h->a[m];
        i = m;
    }
    h->a[i] = last;
    return top;
}

/* Indexed min-heap of drain times: one entry per active slot, keyed (time, slot), 4-ary like the event
   heap (half the levels of a binary heap for the ~10^3 active flows; the four children are adjacent).
   p[slot] is the slot's position, -1 when absent. (time, slot) pairs are unique: the minimum, hence the
   pop order, does not depend on the heap's shape. */
typedef struct { double k; i64 s; } DEnt;
typedef struct { DEnt *a; i64 *p; i64 n; } IHeap;

static int de_less(DEnt x, DEnt y) { return x.k < y.k || (x.k == y.k && x.s < y.s); }

static void ih_up(IHeap *h, i64 i, DEnt e) {
    while (i > 0) {
        i64 q = (i - 1) / 4;
        if (!de_less(e, h->a[q])) break;
        h->a[i] = h->a[q];
        h->p[h->a[i].s] = i;
        i = q;
    }
    h->a[i] = e;
    h->p[e.s] = i;
}

static void ih_down(IHeap *h, i64 i, DEnt e) {
    const i64 n = h->n;
    for (;;) {
        i64 c = 4 * i + 1;
        if (c >= n) break;
        i64 end = c + 4 < n ? c + 4 : n, m = c;
        for (i64 k = c + 1; k < end; k++)
            if (de_less(h->a[k], h->a[m])) m = k;
        if (!de_less(h->a[m], e)) break;
        h->a[i] = h->a[m];
        h->p[h->a[i].s] = i;
        i = m;
    }
    h->a[i] = e;
    h->p[e.s] = i;
}

static void ih_set(IHeap *h, i64 slot, double key) {
    i64 i = h->p[slot];
    DEnt e = {key, slot};
    if (i < 0) {
        ih_up(h, h->n++, e);
        return;
    }
    if (key < h->a[i].k) ih_up(h, i, e);
    else if (key > h->a[i].k) ih_down(h, i, e); /* an unchanged key keeps its place */
}

static void ih_remove(IHeap *h, i64 slot) {
    i64 i = h->p[slot];
    if (i < 0) return;
    i64 last = --h->n;
    h->p[slot] = -1;
    if (i == last) return;
    DEnt e = h->a[last];
    if (i > 0 && de_less(e, h->a[(i - 1) / 4])) ih_up(h, i, e);
    else ih_down(h, i, e);
}

static void add_seed(i64 *seeds, i64 *ns, i64 *sstamp, i64 sid, i64 r) {
    if (sstamp[r] != sid) {
        sstamp[r] = sid;
        seeds[(*ns)++] = r;
    }
}

/* Sum of x[0..n) in numpy's order for a contiguous row (np.sum(axis=1) of a C array): sequential below 8
   terms, else 8 interleaved partial sums combined pairwise, then the tail; so results match the numpy code
   bit for bit. n <= 128 (numpy splits longer rows recursively). */
static double np_rowsum(const double *x, i64 n) {
    if (n < 8) {
        double r = -0.0;
        for (i64 i = 0; i < n; i++) r += x[i];
        return r;
    }
    double r[8];
    for (int j = 0; j < 8; j++) r[j] = x[j];
    i64 body = n - n % 8;
    for (i64 i = 8; i < body; i += 8)
        for (int j = 0; j < 8; j++) r[j] += x[i + j];
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (i64 i = body; i < n; i++) s += x[i];
    return s;
}

/* Per-resource figures of the links (routes.LinkArrays) and the store-and-forward switch. */
typedef struct { const double *delay, *payload, *overhead, *rate, *cap; int saf; } Hops;

/* Latency of a flow of sz bytes on path row p (W entries, padding included): propagation delays summed
   apart, plus with saf the serialization of one packet of min(sz, payload) + overhead bytes on every later
   entry; ideal FCT: sz / the slowest entry's capacity + latency. The numpy order of routes._stats_numpy. */
static void path_figures(const Hops *hp, const int *p, i64 W, double sz, double *lat, double *ideal) {
    double dl[128], sf[128], m = INFINITY;
    for (i64 h = 0; h < W; h++) {
        dl[h] = hp->delay[p[h]];
        if (hp->cap[p[h]] < m) m = hp->cap[p[h]];
    }
    double total = np_rowsum(dl, W);
    if (hp->saf && W > 1) {
        for (i64 h = 1; h < W; h++) {
            i64 r = p[h];
            double pkt = (sz < hp->payload[r] ? sz : hp->payload[r]) + hp->overhead[r];
            sf[h - 1] = pkt * 8.0 / hp->rate[r];
        }
        total = total + np_rowsum(sf, W - 1);
    }
    *lat = total;
    *ideal = sz / m + total;
}

"""
