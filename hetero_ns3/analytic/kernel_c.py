"""C source of the native event loop (same model as :mod:`hetero_ns3.analytic.engine`).

Kept as a Python string so that it ships with the package without package-data rules; compiled on
first use by :mod:`hetero_ns3.analytic.native`. Plain C99, no ns-3, no Python API: it works on the
arrays that :func:`hetero_ns3.analytic.engine.replay` takes and fills the same outputs.

What makes it fast (docs/analytic.md, "Performance"):

* Active flows live in stable slots; remaining bytes are updated lazily (at rate changes only) and the
  next drain comes from an indexed heap (one entry per flow), so an event costs nothing per untouched flow.
* Each resource keeps the list of its active flows, its load (sum of rates) and rated-flow count.
* On a change, only flows that can change are recomputed: those reachable from the resources of added
  or removed flows through flows at or above the unchanged level (see ``unchanged_level``).
* Water-filling freezes, per round, the flows of every resource whose fair share is the smallest on
  all paths through it (local-minimum rule), so rounds are few.
"""

SOURCE = r"""
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef long long i64;
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

/* Indexed min-heap of drain times: one entry per active slot, keyed (time, slot). */
typedef struct { double *k; i64 *s; i64 *p; i64 n; } IHeap;

static int ih_less(const IHeap *h, i64 a, i64 b) {
    return h->k[a] < h->k[b] || (h->k[a] == h->k[b] && h->s[a] < h->s[b]);
}

static void ih_swap(IHeap *h, i64 a, i64 b) {
    double tk = h->k[a];
    i64 ts = h->s[a];
    h->k[a] = h->k[b];
    h->s[a] = h->s[b];
    h->k[b] = tk;
    h->s[b] = ts;
    h->p[h->s[a]] = a;
    h->p[h->s[b]] = b;
}

static void ih_up(IHeap *h, i64 i) {
    while (i > 0) {
        i64 q = (i - 1) / 2;
        if (!ih_less(h, i, q)) break;
        ih_swap(h, i, q);
        i = q;
    }
}

static void ih_down(IHeap *h, i64 i) {
    for (;;) {
        i64 c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && ih_less(h, c + 1, c)) c++;
        if (!ih_less(h, c, i)) break;
        ih_swap(h, i, c);
        i = c;
    }
}

static void ih_set(IHeap *h, i64 slot, double key) {
    i64 i = h->p[slot];
    if (i < 0) {
        i = h->n++;
        h->s[i] = slot;
        h->p[slot] = i;
        h->k[i] = key;
        ih_up(h, i);
        return;
    }
    double old = h->k[i];
    h->k[i] = key;
    if (key < old) ih_up(h, i);
    else ih_down(h, i);
}

static void ih_remove(IHeap *h, i64 slot) {
    i64 i = h->p[slot];
    if (i < 0) return;
    i64 last = --h->n;
    if (i != last) {
        h->k[i] = h->k[last];
        h->s[i] = h->s[last];
        h->p[h->s[i]] = i;
        ih_up(h, i);
        ih_down(h, h->p[h->s[i]]);
    }
    h->p[slot] = -1;
}

static void add_seed(i64 *seeds, i64 *ns, i64 *sstamp, i64 sid, i64 r) {
    if (sstamp[r] != sid) {
        sstamp[r] = sid;
        seeds[(*ns)++] = r;
    }
}

typedef struct {
    const signed char *is_flow;
    const double *dur;
    const i64 *succ_ptr;
    const int *succ_idx;
    int *indeg;
    i64 *zero, *pending;
    i64 nz, np;
    Heap heap;
    double *start, *finish;
    int err;
} Dag;

static void begin_task(Dag *d, i64 i, double t) {
    d->start[i] = t;
    if (d->is_flow[i]) {
        d->pending[d->np++] = i;
    } else if (d->dur[i] > 0.0) {
        if (heap_push(&d->heap, t + d->dur[i], i)) d->err = 3;
    } else {
        d->zero[d->nz++] = i;
    }
}

static void complete_task(Dag *d, i64 i, double t) {
    d->finish[i] = t;
    for (i64 k = d->succ_ptr[i]; k < d->succ_ptr[i + 1]; k++) {
        i64 s = d->succ_idx[k];
        if (--d->indeg[s] == 0) begin_task(d, s, t);
    }
}

#define ALLOC(T, name, count) T *name = (T *)calloc((size_t)(count) + 1, sizeof(T)); if (!name) ok = 0;
/* Grow a per-slot array from oc to nc entries (times m), zero-filling the new part; 0 on failure. */
#define GROW(T, name, oc, nc, m)                                                           \
    do {                                                                                 \
        T *g_ = (T *)realloc(name, (size_t)((nc) * (m) + 1) * sizeof(T));                \
        if (!g_) { rc = 3; goto out; }                                                   \
        memset(g_ + (oc) * (m), 0, (size_t)(((nc) - (oc)) * (m)) * sizeof(T));           \
        name = g_;                                                                       \
    } while (0)

/* stats: events, rate_updates, fill_rounds, max_active, reused, recomputed.
   Returns 0, 1 stuck tasks, 2 zero rate, 3 no memory. */
int flowsim_replay(i64 n, const signed char *is_flow, const double *dur, const double *release, const i64 *dep_ptr,
                   const i64 *succ_ptr, const int *succ_idx, const int *flow_row, const i64 *size, i64 nflows,
                   i64 W, const int *res, const double *lat, i64 nres, const double *cap, double tol,
                   int incremental, double reuse_rtol, double level_rtol, double *start, double *finish,
                   double *drain, i64 *stats) {
    const i64 pad = nres - 1;
    const double inf = INFINITY;
    int ok = 1, rc = 0;
    Dag d;
    memset(&d, 0, sizeof d);
    d.is_flow = is_flow;
    d.dur = dur;
    d.succ_ptr = succ_ptr;
    d.succ_idx = succ_idx;
    d.start = start;
    d.finish = finish;
    /* Slots grow on demand (doubling): they number the flows active at once, not all flows. */
    i64 F = nflows + 1 < 1024 ? nflows + 1 : 1024;
    ALLOC(int, indeg, n) ALLOC(i64, zero, n) ALLOC(i64, pending, n)
    /* Per slot (stable while a flow is active). */
    ALLOC(i64, task, F) ALLOC(double, rate, F) ALLOC(double, remu, F) ALLOC(double, tu, F)
    ALLOC(double, hkey, F) ALLOC(i64, hslot, F) ALLOC(i64, hpos, F)
    ALLOC(char, isnew, F) ALLOC(i64, apos, F) ALLOC(i64, fvis, F) ALLOC(double, low, F) ALLOC(int, ares, F * W)
    ALLOC(i64, mpos, F * W)
    ALLOC(i64, freel, F) ALLOC(i64, alist, F) ALLOC(i64, live, F) ALLOC(i64, newl, F)
    /* Per resource. */
    ALLOC(double, load, nres) ALLOC(i64, nrated, nres) ALLOC(i64, nnew, nres) ALLOC(double, remcap, nres)
    ALLOC(double, share, nres) ALLOC(i64, cnt, nres) ALLOC(i64, stamp, nres) ALLOC(char, ismin, nres)
    ALLOC(char, notmin, nres) ALLOC(i64, rlist, nres) ALLOC(i64, tlist, nres) ALLOC(i64, seeds, nres)
    ALLOC(i64, sstamp, nres) ALLOC(i64, vstamp, nres) ALLOC(i64, queue, nres) ALLOC(i64, mlen, nres)
    ALLOC(i64, mcap, nres)
    i64 **mem = (i64 **)calloc((size_t)nres, sizeof(i64 *));
    if (!mem || !ok) { rc = 3; goto out; }
    IHeap dh = {hkey, hslot, hpos, 0};
    for (i64 j = 0; j < F; j++) hpos[j] = -1;
    d.indeg = indeg;
    d.zero = zero;
    d.pending = pending;
    i64 nfree = 0;
    for (i64 j = F - 1; j >= 0; j--) freel[nfree++] = j;
    for (i64 i = 0; i < n; i++) {
        indeg[i] = (int)(dep_ptr[i + 1] - dep_ptr[i]);
        if (drain) drain[i] = NAN;
        finish[i] = NAN;
        start[i] = 0.0;
    }
    for (i64 i = 0; i < n; i++) {
        if (indeg[i] != 0) continue;
        if (release && release[i] > 0.0) {
            if (heap_push(&d.heap, release[i], -1 - i)) { rc = 3; goto out; }
        } else {
            begin_task(&d, i, 0.0);
        }
    }
    i64 na = 0, nn = 0, cur = 0, ns = 0, sid = 1, vid = 0;
    i64 events = 0, updates = 0, rounds = 0, max_active = 0, reused = 0, recomputed = 0;
    double t = 0.0, removed_min = inf;
    int dirty = 0;
    for (;;) {
        while (d.nz) complete_task(&d, zero[--d.nz], t);
        if (d.err) { rc = d.err; goto out; }
        /* Activate flows that start now. */
        for (i64 k = 0; k < d.np; k++) {
            if (nfree == 0) {
                i64 nc = 2 * F;
                GROW(i64, task, F, nc, 1); GROW(double, rate, F, nc, 1); GROW(double, remu, F, nc, 1);
                GROW(double, tu, F, nc, 1); GROW(double, hkey, F, nc, 1); GROW(i64, hslot, F, nc, 1);
                GROW(i64, hpos, F, nc, 1); GROW(char, isnew, F, nc, 1); GROW(i64, apos, F, nc, 1);
                GROW(i64, fvis, F, nc, 1); GROW(double, low, F, nc, 1); GROW(int, ares, F, nc, W);
                GROW(i64, mpos, F, nc, W); GROW(i64, freel, F, nc, 1); GROW(i64, alist, F, nc, 1);
                GROW(i64, live, F, nc, 1); GROW(i64, newl, F, nc, 1);
                for (i64 q = F; q < nc; q++) hpos[q] = -1;
                for (i64 q = nc - 1; q >= F; q--) freel[nfree++] = q;
                dh.k = hkey;
                dh.s = hslot;
                dh.p = hpos;
                F = nc;
            }
            i64 i = pending[k], j = freel[--nfree];
            task[j] = i;
            rate[j] = 0.0;
            remu[j] = (double)size[i];
            tu[j] = t;
            isnew[j] = 1;
            newl[nn++] = j;
            apos[j] = na;
            alist[na++] = j;
            memcpy(ares + (i64)j * W, res + (i64)flow_row[i] * W, (size_t)W * sizeof(int));
            const int *p = ares + j * W;
            for (i64 h = 0; h < W && p[h] != pad; h++) {
                i64 r = p[h];
                if (mlen[r] == mcap[r]) {
                    i64 c2 = mcap[r] ? 2 * mcap[r] : 8;
                    i64 *nm = (i64 *)realloc(mem[r], (size_t)c2 * sizeof(i64));
                    if (!nm) { rc = 3; goto out; }
                    mem[r] = nm;
                    mcap[r] = c2;
                }
                mpos[j * W + h] = mlen[r];
                mem[r][mlen[r]++] = j;
            }
            dirty = 1;
        }
        d.np = 0;
        if (dirty && na) {
            double x0 = incremental ? removed_min : 0.0;
            if (incremental && nn) {
                /* Lower bound of the level at which a resource crossed by new flows saturates: two of the
                   tangents of unchanged_level (old flows all above the level; all below it). */
                i64 nt = 0;
                for (i64 q = 0; q < nn; q++) {
                    const int *p = ares + newl[q] * W;
                    for (i64 h = 0; h < W && p[h] != pad; h++)
                        if (nnew[p[h]]++ == 0) tlist[nt++] = p[h];
                }
                for (i64 q = 0; q < nt; q++) {
                    i64 r = tlist[q];
                    double a = (double)nnew[r];
                    double c0 = cap[r] / ((double)nrated[r] + a), c1 = (cap[r] - load[r]) / a;
                    double c = c0 > c1 ? c0 : c1;
                    if (c < x0) x0 = c;
                    nnew[r] = 0;
                    add_seed(seeds, &ns, sstamp, sid, r);
                }
            }
            /* Live flows: reachable from a changed resource through flows at or above x0. */
            double thr = x0 * (1.0 - reuse_rtol);
            i64 nl = 0;
            if (!incremental) {
                for (i64 q = 0; q < na; q++) live[nl++] = alist[q];
            } else {
                vid++;
                i64 qh = 0, qt = 0;
                for (i64 k = 0; k < ns; k++) {
                    vstamp[seeds[k]] = vid;
                    queue[qt++] = seeds[k];
                }
                while (qh < qt) {
                    i64 r = queue[qh++];
                    const i64 *m = mem[r];
                    for (i64 k = 0; k < mlen[r]; k++) {
                        i64 j = m[k];
                        if (fvis[j] == vid || (!isnew[j] && rate[j] < thr)) continue;
                        fvis[j] = vid;
                        live[nl++] = j;
                        const int *p = ares + j * W;
                        for (i64 h = 0; h < W && p[h] != pad; h++) {
                            if (vstamp[p[h]] != vid) {
                                vstamp[p[h]] = vid;
                                queue[qt++] = p[h];
                            }
                        }
                    }
                }
            }
            ns = 0;
            sid++;
            /* Residual capacities: capacity minus the load of the flows that keep their rates. */
            cur++;
            i64 nr = 0;
            for (i64 q = 0; q < nl; q++) {
                i64 j = live[q];
                const int *p = ares + j * W;
                remu[j] -= rate[j] * (t - tu[j]);
                tu[j] = t;
                for (i64 h = 0; h < W && p[h] != pad; h++) {
                    i64 r = p[h];
                    if (stamp[r] != cur) {
                        stamp[r] = cur;
                        remcap[r] = cap[r] - load[r];
                        cnt[r] = 0;
                        rlist[nr++] = r;
                    }
                    cnt[r]++;
                    if (!isnew[j]) {
                        remcap[r] += rate[j];
                        load[r] -= rate[j];
                        nrated[r]--;
                    }
                }
            }
            reused += na - nl;
            recomputed += nl;
            updates++;
            if (na > max_active) max_active = na;
            while (nl) {
                rounds++;
                for (i64 q = 0; q < nr; q++) {
                    i64 r = rlist[q];
                    share[r] = cnt[r] > 0 ? remcap[r] / (double)cnt[r] : inf;
                    ismin[r] = 0;
                    notmin[r] = 0;
                }
                for (i64 q = 0; q < nl; q++) {
                    const int *p = ares + live[q] * W;
                    double m = inf;
                    for (i64 h = 0; h < W && p[h] != pad; h++)
                        if (share[p[h]] < m) m = share[p[h]];
                    low[q] = m;
                    double lim = m * (1.0 + level_rtol);
                    for (i64 h = 0; h < W && p[h] != pad; h++) {
                        if (share[p[h]] > lim) notmin[p[h]] = 1;
                        else ismin[p[h]] = 1;
                    }
                }
                i64 w = 0;
                for (i64 q = 0; q < nl; q++) {
                    i64 j = live[q];
                    const int *p = ares + j * W;
                    int hit = 0;
                    for (i64 h = 0; h < W && p[h] != pad; h++)
                        if (ismin[p[h]] && !notmin[p[h]]) { hit = 1; break; }
                    if (hit) {
                        double x = low[q];
                        if (!(x > 0.0) || !isfinite(x)) { rc = 2; goto out; }
                        rate[j] = x;
                        ih_set(&dh, j, t + remu[j] / x);
                        for (i64 h = 0; h < W && p[h] != pad; h++) {
                            remcap[p[h]] -= x;
                            cnt[p[h]]--;
                            load[p[h]] += x;
                            nrated[p[h]]++;
                        }
                    } else {
                        live[w] = j;
                        low[w] = low[q];
                        w++;
                    }
                }
                if (w == nl) { rc = 2; goto out; }
                nl = w;
            }
            for (i64 q = 0; q < nn; q++) isnew[newl[q]] = 0;
            nn = 0;
            removed_min = inf;
        }
        dirty = 0;
        /* Next event: the earliest valid drain or the earliest task event. */
        double td = dh.n ? dh.k[0] : inf;
        double th = d.heap.n ? d.heap.a[0].t : inf;
        if (td == inf && th == inf) break;
        events++;
        if (td <= th) {
            t = td;
            double lim = td + tol;
            while (dh.n && dh.k[0] <= lim) {
                i64 j = dh.s[0];
                ih_remove(&dh, j);
                i64 i = task[j];
                if (drain) drain[i] = t;
                if (rate[j] < removed_min) removed_min = rate[j];
                const int *p = ares + j * W;
                for (i64 h = 0; h < W && p[h] != pad; h++) {
                    i64 r = p[h];
                    add_seed(seeds, &ns, sstamp, sid, r);
                    i64 k = mpos[j * W + h], last = mem[r][--mlen[r]];
                    if (last != j) {
                        mem[r][k] = last;
                        const int *pl = ares + last * W;
                        for (i64 h2 = 0; h2 < W; h2++)
                            if (pl[h2] == r) { mpos[last * W + h2] = k; break; }
                    }
                    load[r] -= rate[j];
                    if (--nrated[r] == 0) load[r] = 0.0; /* no drift on idle resources */
                }
                i64 moved = alist[--na];
                alist[apos[j]] = moved;
                apos[moved] = apos[j];
                task[j] = -1;
                freel[nfree++] = j;
                double tf = t + lat[flow_row[i]];
                if (tf > t) {
                    if (heap_push(&d.heap, tf, i)) { rc = 3; goto out; }
                } else {
                    zero[d.nz++] = i;
                }
                dirty = 1;
            }
        } else {
            t = th;
        }
        while (d.heap.n && d.heap.a[0].t <= t) {
            Ev e = heap_pop(&d.heap);
            if (e.code >= 0) complete_task(&d, e.code, t);
            else begin_task(&d, -1 - e.code, t);
        }
        if (d.err) { rc = d.err; goto out; }
    }
    for (i64 i = 0; i < n; i++)
        if (indeg[i] > 0) { rc = 1; break; }
    stats[0] = events;
    stats[1] = updates;
    stats[2] = rounds;
    stats[3] = max_active;
    stats[4] = reused;
    stats[5] = recomputed;
out:
    if (mem)
        for (i64 r = 0; r < nres; r++) free(mem[r]);
    free(mem);
    free(d.heap.a);
    free(indeg); free(zero); free(pending); free(task); free(rate); free(remu); free(tu);
    free(hkey); free(hslot); free(hpos);
    free(isnew); free(apos); free(fvis); free(low); free(ares); free(mpos); free(freel); free(alist); free(live);
    free(newl); free(load); free(nrated); free(nnew); free(remcap); free(share); free(cnt); free(stamp); free(ismin);
    free(notmin); free(rlist); free(tlist); free(seeds); free(sstamp); free(vstamp); free(queue); free(mlen);
    free(mcap);
    return rc;
}

/* ---- Routing: per-flow ECMP walks over dense next-hop tables (routes.py documents the contract). ---- */

typedef unsigned long long u64;

static u64 mix64(u64 x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* routes.ecmp_hash: seedw = seed * 0x94D049BB133111EB mod 2^64. */
static u64 flow_hash(u64 fid, u64 node, u64 seedw) {
    u64 x = fid * 0x9E3779B97F4A7C15ULL;
    x ^= node + 0x632BE59BD9B4E019ULL;
    x += seedw;
    return mix64(x);
}

/* routes.packet_backend_hash: seedw = ecmp_seed. */
static u64 packet_hash(u64 seq, u64 node, u64 src, u64 dst, u64 seedw) {
    u64 sport = 49152ULL + ((((seq * 2654435761ULL) & 0xFFFFFFFFULL) >> 18) % 16384ULL);
    u64 h = mix64((seedw << 32) ^ node);
    h = mix64(h ^ ((src << 32) | dst));
    return mix64(h ^ ((sport << 16) | 4791ULL) ^ (17ULL << 40));
}

/* Walk flow f from src[f] to dst[f]: at node u the next-hop links toward dst are
   nh_link[nh_off[k] .. nh_off[k] + nh_cnt[k]) with k = dslot[dst] * N + u; pick = hash % count.
   res (F, W) gets resources 2 * link + (reverse direction), padded with pad; hops[f] the count.
   Returns 0 with *need = the longest path; 1 no route (bad[0] node, bad[1] destination);
   2 a walk longer than N hops (loop); 3 no memory. Paths longer than W are counted in *need but not
   written: the caller retries with W = *need. key[f]: the hash identity (flow or connection id); mode 0:
   flow hash of key, 1: packet hash with key as the flow sequence number.
   Flows are walked grouped by destination (a counting sort), so that one destination's table stays in
   cache; each flow's path depends on its own hash only, so the order changes nothing else. */
int flowsim_route(i64 F, const i64 *src, const i64 *dst, const i64 *key, i64 N, i64 S, const i64 *dslot,
                  const i64 *nh_off, const int *nh_cnt, const int *nh_link, const i64 *la, const i64 *lb, int mode, u64 seedw,
                  i64 W, int pad, int *res, int *hops, i64 *need, i64 *bad) {
    i64 longest = 0;
    for (i64 f = 0; f < F; f++)
        if (dslot[dst[f]] < 0) { bad[0] = src[f]; bad[1] = dst[f]; return 1; }
    i64 *start = (i64 *)calloc((size_t)S + 1, sizeof(i64));
    int *order = (int *)malloc((size_t)(F > 0 ? F : 1) * sizeof(int));
    if (!start || !order) { free(start); free(order); return 3; }
    for (i64 f = 0; f < F; f++) start[dslot[dst[f]] + 1]++;
    for (i64 k = 0; k < S; k++) start[k + 1] += start[k];
    for (i64 f = 0; f < F; f++) order[start[dslot[dst[f]]]++] = (int)f;
    free(start);
    int rc = 0;
    for (i64 q = 0; q < F; q++) {
        i64 f = order[q];
        i64 u = src[f], d = dst[f], s = dslot[d], h = 0;
        int *row = res + f * W;
        const i64 *toff = nh_off + s * N;
        const int *tcnt = nh_cnt + s * N;
        do {
            i64 lo = toff[u], cnt = tcnt[u];
            if (cnt <= 0) { bad[0] = u; bad[1] = d; rc = 1; goto out; }
            i64 pick = 0;
            if (cnt > 1) {
                u64 hv = mode ? packet_hash((u64)key[f], (u64)u, (u64)src[f], (u64)d, seedw)
                              : flow_hash((u64)key[f], (u64)u, seedw);
                pick = (i64)(hv % (u64)cnt);
            }
            i64 li = nh_link[lo + pick];
            int fwd = la[li] == u;
            if (h < W) row[h] = (int)(2 * li + !fwd);
            u = fwd ? lb[li] : la[li];
            if (++h > N) { bad[0] = src[f]; bad[1] = d; rc = 2; goto out; }
        } while (u != d);
        for (i64 k = h; k < W; k++) row[k] = pad;
        hops[f] = (int)h;
        if (h > longest) longest = h;
    }
    *need = longest;
out:
    free(order);
    return rc;
}

/* Shrink res from (F, W) to (F, w) in place (w <= W). */
void flowsim_narrow(i64 F, i64 W, i64 w, int *res) {
    if (w == W) return;
    for (i64 f = 0; f < F; f++) memmove(res + f * w, res + f * W, (size_t)w * sizeof(int));
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

/* Per flow: latency (propagation delays over the W entries of its row, plus with saf the store-and-forward
   time of one packet of min(size, payload) + overhead bytes per later entry, summed apart and added),
   ideal FCT (size / the slowest entry's capacity + latency); carried[r] += size over every entry of res
   (pad included) in flow-major order, as np.bincount does. W <= 128. */
void flowsim_path_stats(i64 F, i64 W, const int *res, const double *size, const double *delay,
                        const double *payload, const double *overhead, const double *rate, const double *cap,
                        int saf, double *lat, double *ideal, double *carried) {
    double dl[128], sf[128];
    for (i64 f = 0; f < F; f++) {
        const int *p = res + f * W;
        double m = INFINITY, sz = size[f];
        for (i64 h = 0; h < W; h++) {
            i64 r = p[h];
            dl[h] = delay[r];
            if (cap[r] < m) m = cap[r];
            carried[r] += sz;
        }
        double total = np_rowsum(dl, W);
        if (saf && W > 1) {
            for (i64 h = 1; h < W; h++) {
                i64 r = p[h];
                double pkt = (sz < payload[r] ? sz : payload[r]) + overhead[r];
                sf[h - 1] = pkt * 8.0 / rate[r];
            }
            total = total + np_rowsum(sf, W - 1);
        }
        lat[f] = total;
        ideal[f] = sz / m + total;
    }
}

/* Reverse a dependency CSR (engine.successors): successors of i in increasing task order. The insertion
   cursors live in succ_ptr itself (each ends at the next task's start), then shift back by one. */
void flowsim_successors(i64 n, const i64 *dep_ptr, const int *dep_idx, i64 *succ_ptr, int *succ_idx) {
    memset(succ_ptr, 0, (size_t)(n + 1) * sizeof(i64));
    i64 m = dep_ptr[n];
    for (i64 k = 0; k < m; k++) succ_ptr[dep_idx[k] + 1]++;
    for (i64 i = 0; i < n; i++) succ_ptr[i + 1] += succ_ptr[i];
    for (i64 i = 0; i < n; i++)
        for (i64 k = dep_ptr[i]; k < dep_ptr[i + 1]; k++) succ_idx[succ_ptr[dep_idx[k]]++] = (int)i;
    memmove(succ_ptr + 1, succ_ptr, (size_t)n * sizeof(i64));
    succ_ptr[0] = 0;
}
"""
