"""C source of the native event loop (same algorithm as :mod:`hetero_ns3.analytic.engine`).

Kept as a Python string so that it ships with the package without package-data rules; compiled on
first use by :mod:`hetero_ns3.analytic.native`. Plain C99, no ns-3, no Python API: it works on the
arrays that :func:`hetero_ns3.analytic.engine.replay` takes and fills the same outputs.
"""

SOURCE = r"""
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef long long i64;
typedef struct { double t; i64 code; } Ev;
typedef struct { Ev *a; i64 n, cap; } Heap;

static int ev_less(Ev x, Ev y) { return x.t < y.t || (x.t == y.t && x.code < y.code); }

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
        i64 p = (i - 1) / 2;
        if (!ev_less(e, h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = e;
    return 0;
}

static Ev heap_pop(Heap *h) {
    Ev top = h->a[0];
    Ev last = h->a[--h->n];
    i64 i = 0, n = h->n;
    if (n == 0) return top;
    for (;;) {
        i64 c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ev_less(h->a[c + 1], h->a[c])) c++;
        if (!ev_less(h->a[c], last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    h->a[i] = last;
    return top;
}

static void add_seed(i64 *seeds, i64 *ns, i64 *sstamp, i64 sid, i64 r) {
    if (sstamp[r] != sid) {
        sstamp[r] = sid;
        seeds[(*ns)++] = r;
    }
}

typedef struct {
    /* inputs */
    const signed char *is_flow;
    const double *dur;
    const i64 *succ_ptr, *succ_idx, *flow_row;
    /* state */
    i64 *indeg, *zero, *pending;
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

/* stats: events, rate_updates, fill_rounds, max_active, reused. Returns 0, 1 stuck, 2 zero rate, 3 no memory. */
int flowsim_replay(i64 n, const signed char *is_flow, const double *dur, const double *release, const i64 *dep_ptr,
                   const i64 *succ_ptr, const i64 *succ_idx, const i64 *flow_row, const double *size, i64 nflows,
                   i64 width, const int *res, const double *lat, i64 nres, const double *cap, double tol,
                   int incremental, double reuse_rtol, double level_rtol, double *start, double *finish,
                   double *drain, i64 *stats) {
    const i64 pad = nres - 1;
    const double inf = INFINITY;
    Dag d;
    memset(&d, 0, sizeof d);
    d.is_flow = is_flow;
    d.dur = dur;
    d.succ_ptr = succ_ptr;
    d.succ_idx = succ_idx;
    d.flow_row = flow_row;
    d.start = start;
    d.finish = finish;
    d.indeg = (i64 *)malloc((size_t)(n + 1) * sizeof(i64));
    d.zero = (i64 *)malloc((size_t)(n + 1) * sizeof(i64));
    d.pending = (i64 *)malloc((size_t)(n + 1) * sizeof(i64));
    i64 fcap = nflows + 1;
    /* Active flows (compacted arrays) and their resources inline (ares[j*width + h], pad-terminated). */
    i64 *act = (i64 *)malloc((size_t)fcap * sizeof(i64));
    double *rem = (double *)malloc((size_t)fcap * sizeof(double));
    double *rate = (double *)malloc((size_t)fcap * sizeof(double));
    double *left = (double *)malloc((size_t)fcap * sizeof(double));
    double *low = (double *)malloc((size_t)fcap * sizeof(double));
    i64 *live = (i64 *)malloc((size_t)fcap * sizeof(i64));
    int *ares = (int *)malloc((size_t)(fcap * width) * sizeof(int));
    /* Per resource: load = sum of the rates of rated active flows, nrated = their number. */
    double *load = (double *)calloc((size_t)nres, sizeof(double));
    i64 *nrated = (i64 *)calloc((size_t)nres, sizeof(i64));
    i64 *nnew = (i64 *)calloc((size_t)nres, sizeof(i64));
    double *remcap = (double *)malloc((size_t)nres * sizeof(double));
    double *share = (double *)malloc((size_t)nres * sizeof(double));
    i64 *cnt = (i64 *)calloc((size_t)nres, sizeof(i64));
    i64 *stamp = (i64 *)calloc((size_t)nres, sizeof(i64));
    char *ismin = (char *)calloc((size_t)nres, 1);
    char *notmin = (char *)calloc((size_t)nres, 1);
    i64 *rlist = (i64 *)malloc((size_t)nres * sizeof(i64));
    i64 *tlist = (i64 *)malloc((size_t)nres * sizeof(i64));
    i64 *seeds = (i64 *)malloc((size_t)nres * sizeof(i64));
    i64 *sstamp = (i64 *)calloc((size_t)nres, sizeof(i64));
    i64 *vstamp = (i64 *)calloc((size_t)nres, sizeof(i64));
    i64 *queue = (i64 *)malloc((size_t)nres * sizeof(i64));
    i64 *fvis = (i64 *)calloc((size_t)fcap, sizeof(i64));
    i64 *slot = (i64 *)malloc((size_t)(n + 1) * sizeof(i64));
    i64 *mpos = (i64 *)malloc((size_t)(fcap * width) * sizeof(i64));
    i64 **mem = (i64 **)calloc((size_t)nres, sizeof(i64 *));
    i64 *mlen = (i64 *)calloc((size_t)nres, sizeof(i64));
    i64 *mcap = (i64 *)calloc((size_t)nres, sizeof(i64));
    i64 ns = 0, sid = 1, vid = 0;
    int rc = 0;
    if (!d.indeg || !d.zero || !d.pending || !act || !rem || !rate || !left || !low || !live || !ares || !load ||
        !nrated || !nnew || !remcap || !share || !cnt || !stamp || !ismin || !notmin || !rlist || !tlist ||
        !seeds || !sstamp || !vstamp || !queue || !fvis || !slot || !mpos || !mem || !mlen || !mcap) {
        rc = 3;
        goto out;
    }
    for (i64 i = 0; i < n; i++) {
        d.indeg[i] = dep_ptr[i + 1] - dep_ptr[i];
        drain[i] = NAN;
        finish[i] = NAN;
        start[i] = 0.0;
    }
    for (i64 i = 0; i < n; i++) {
        if (d.indeg[i] != 0) continue;
        if (release && release[i] > 0.0) {
            if (heap_push(&d.heap, release[i], -1 - i)) { rc = 3; goto out; }
        } else {
            begin_task(&d, i, 0.0);
        }
    }
    i64 na = 0, n_added = 0, cur = 0;
    i64 events = 0, updates = 0, rounds = 0, max_active = 0, reused = 0, recomputed = 0;
    double t = 0.0, removed_min = inf;
    int dirty = 0;
    for (;;) {
        while (d.nz) complete_task(&d, d.zero[--d.nz], t);
        if (d.err) { rc = d.err; goto out; }
        if (d.np) {
            for (i64 k = 0; k < d.np; k++) {
                i64 i = d.pending[k];
                act[na] = i;
                rem[na] = size[i];
                rate[na] = 0.0;
                left[na] = inf;
                memcpy(ares + na * width, res + flow_row[i] * width, (size_t)width * sizeof(int));
                slot[i] = na;
                const int *p = ares + na * width;
                for (i64 h = 0; h < width && p[h] != pad; h++) {
                    i64 r = p[h];
                    if (mlen[r] == mcap[r]) {
                        i64 nc2 = mcap[r] ? 2 * mcap[r] : 8;
                        i64 *nm = (i64 *)realloc(mem[r], (size_t)nc2 * sizeof(i64));
                        if (!nm) { rc = 3; goto out; }
                        mem[r] = nm;
                        mcap[r] = nc2;
                    }
                    mpos[flow_row[i] * width + h] = mlen[r];
                    mem[r][mlen[r]++] = i;
                }
                na++;
            }
            n_added += d.np;
            d.np = 0;
            dirty = 1;
        }
        if (dirty) {
            dirty = 0;
            if (na) {
                i64 n_old = na - n_added;
                double x0 = incremental ? removed_min : 0.0;
                if (incremental && n_added) {
                    /* Lower bound of the level at which a resource crossed by new flows saturates: two of
                       the tangents of unchanged_level (all old flows above the level; all below it). */
                    i64 nt = 0;
                    for (i64 j = n_old; j < na; j++) {
                        const int *p = ares + j * width;
                        for (i64 h = 0; h < width && p[h] != pad; h++)
                            if (nnew[p[h]]++ == 0) tlist[nt++] = p[h];
                    }
                    for (i64 q = 0; q < nt; q++) {
                        i64 r = tlist[q];
                        double a = (double)nnew[r];
                        double c0 = cap[r] / ((double)nrated[r] + a);
                        double c1 = (cap[r] - load[r]) / a;
                        double c = c0 > c1 ? c0 : c1;
                        if (c < x0) x0 = c;
                        nnew[r] = 0;
                    }
                }
                /* Live flows: those connected to a resource of an added or removed flow through flows at
                   or above x0 (new flows included). Flows below x0 keep their rates (unchanged level);
                   components that no change reaches solve the same problem as before. */
                double thr = x0 * (1.0 - reuse_rtol);
                i64 nl = 0;
                if (!incremental) {
                    for (i64 j = 0; j < na; j++) live[nl++] = j;
                } else {
                    for (i64 j = n_old; j < na; j++) {
                        const int *p = ares + j * width;
                        for (i64 h = 0; h < width && p[h] != pad; h++) add_seed(seeds, &ns, sstamp, sid, p[h]);
                    }
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
                            i64 j = slot[m[k]];
                            if (fvis[j] == vid || (j < n_old && rate[j] < thr)) continue;
                            fvis[j] = vid;
                            live[nl++] = j;
                            const int *p = ares + j * width;
                            for (i64 h = 0; h < width && p[h] != pad; h++) {
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
                /* Residual capacities for the live flows: capacity minus the load of everyone else. */
                cur++;
                i64 nr = 0;
                for (i64 q = 0; q < nl; q++) {
                    i64 j = live[q];
                    const int *p = ares + j * width;
                    for (i64 h = 0; h < width && p[h] != pad; h++) {
                        i64 r = p[h];
                        if (stamp[r] != cur) {
                            stamp[r] = cur;
                            remcap[r] = cap[r] - load[r];
                            cnt[r] = 0;
                            rlist[nr++] = r;
                        }
                        cnt[r]++;
                        remcap[r] += rate[j]; /* 0 for new flows */
                        if (j < n_old) {
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
                        const int *p = ares + live[q] * width;
                        double m = inf;
                        for (i64 h = 0; h < width && p[h] != pad; h++)
                            if (share[p[h]] < m) m = share[p[h]];
                        low[q] = m;
                        double lim = m * (1.0 + level_rtol);
                        for (i64 h = 0; h < width && p[h] != pad; h++) {
                            if (share[p[h]] > lim) notmin[p[h]] = 1;
                            else ismin[p[h]] = 1;
                        }
                    }
                    i64 w = 0;
                    for (i64 q = 0; q < nl; q++) {
                        i64 j = live[q];
                        const int *p = ares + j * width;
                        int hit = 0;
                        for (i64 h = 0; h < width && p[h] != pad; h++)
                            if (ismin[p[h]] && !notmin[p[h]]) { hit = 1; break; }
                        if (hit) {
                            double x = low[q];
                            if (!(x > 0.0) || !isfinite(x)) { rc = 2; goto out; }
                            rate[j] = x;
                            left[j] = rem[j] / x;
                            for (i64 h = 0; h < width && p[h] != pad; h++) {
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
            }
            n_added = 0;
            removed_min = inf;
        }
        double dmin = inf;
        for (i64 j = 0; j < na; j++)
            if (left[j] < dmin) dmin = left[j];
        double th = d.heap.n ? d.heap.a[0].t : inf;
        if (dmin == inf && th == inf) break;
        events++;
        if (t + dmin <= th) {
            double dt = dmin;
            t = t + dmin;
            i64 w = 0;
            for (i64 j = 0; j < na; j++) {
                if (left[j] <= dmin + tol) {
                    i64 i = act[j];
                    drain[i] = t;
                    if (rate[j] < removed_min) removed_min = rate[j];
                    const int *p = ares + j * width;
                    for (i64 h = 0; h < width && p[h] != pad; h++) {
                        i64 r = p[h];
                        add_seed(seeds, &ns, sstamp, sid, r);
                        i64 k = mpos[flow_row[i] * width + h], last = mem[r][--mlen[r]];
                        if (last != i) {
                            mem[r][k] = last;
                            const int *pl = res + flow_row[last] * width;
                            for (i64 h2 = 0; h2 < width; h2++)
                                if (pl[h2] == r) { mpos[flow_row[last] * width + h2] = k; break; }
                        }
                        load[p[h]] -= rate[j];
                        if (--nrated[p[h]] == 0) load[p[h]] = 0.0; /* no drift on idle resources */
                    }
                    double tf = t + lat[flow_row[i]];
                    if (tf > t) {
                        if (heap_push(&d.heap, tf, i)) { rc = 3; goto out; }
                    } else {
                        d.zero[d.nz++] = i;
                    }
                } else {
                    if (w != j) {
                        act[w] = act[j];
                        slot[act[w]] = w;
                        rate[w] = rate[j];
                        memcpy(ares + w * width, ares + j * width, (size_t)width * sizeof(int));
                    }
                    rem[w] = rem[j] - rate[j] * dt;
                    left[w] = left[j] - dt;
                    w++;
                }
            }
            na = w;
            dirty = 1;
        } else {
            double dt = th - t;
            t = th;
            for (i64 j = 0; j < na; j++) {
                rem[j] -= rate[j] * dt;
                left[j] -= dt;
            }
        }
        while (d.heap.n && d.heap.a[0].t <= t) {
            Ev e = heap_pop(&d.heap);
            if (e.code >= 0) complete_task(&d, e.code, t);
            else begin_task(&d, -1 - e.code, t);
        }
        if (d.err) { rc = d.err; goto out; }
    }
    for (i64 i = 0; i < n; i++)
        if (d.indeg[i] > 0) { rc = 1; break; }
    stats[0] = events;
    stats[1] = updates;
    stats[2] = rounds;
    stats[3] = max_active;
    stats[4] = reused;
    stats[5] = recomputed;
out:
    free(d.indeg); free(d.zero); free(d.pending); free(d.heap.a);
    free(act); free(rem); free(rate); free(left); free(low); free(live); free(ares); free(load); free(nrated);
    free(nnew); free(remcap); free(share); free(cnt); free(stamp); free(ismin); free(notmin); free(rlist);
    free(tlist); free(seeds); free(sstamp); free(vstamp); free(queue); free(fvis); free(slot);
    free(mpos);
    if (mem)
        for (i64 r = 0; r < nres; r++) free(mem[r]);
    free(mem); free(mlen); free(mcap);
    return rc;
}
"""
