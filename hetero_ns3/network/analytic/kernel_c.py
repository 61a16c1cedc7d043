"""C source of the native event loop (same model as :mod:`hetero_ns3.network.analytic.engine`).

Kept as a Python string so that it ships with the package without package-data rules; compiled on
first use by :mod:`hetero_ns3.network.analytic.native`. Plain C99, no ns-3, no Python API: it works on the
arrays that :func:`hetero_ns3.network.analytic.engine.replay` takes and fills the same outputs.

What makes it fast (docs/analytic.md, "Performance"):

* Active flows live in stable slots; remaining bytes are updated lazily (at rate changes only) and the
  next drain comes from an indexed heap (one entry per flow), so an event costs nothing per untouched flow.
* Each resource keeps the list of its active flows, its load (sum of rates) and rated-flow count.
* On a change, only flows that can change are recomputed: those reachable from the resources of added
  or removed flows through flows at or above the unchanged level (see ``unchanged_level``).
* Water-filling freezes, per round, the flows of every resource whose fair share is the smallest on
  all paths through it (local-minimum rule), so rounds are few.
"""

from hetero_ns3.network.analytic.kernel_common_c import COMMON_SOURCE
from hetero_ns3.network.analytic.kernel_paths_c import PATHS_SOURCE

_REPLAY = r"""
/* code[i]: the duration of compute task i (>= 0), or -(f + 1) for the task of flow row f (exact in a
   double): one array read per task tells flows, their rows and durations apart. */
typedef struct {
    const double *code;
    const int *path_row; /* to prefetch a starting flow's entries (NULL: none) */
    const i64 *fsize;
    const unsigned *succ_ptr;
    const int *succ_idx;
    i64 *zero, *pending;
    i64 nz, np;
    Heap heap;
    double *start, *finish; /* start[i] < 0: minus the dependencies task i still waits for */
    int err;
} Dag;

static void begin_task(Dag *d, i64 i, double t) {
    d->start[i] = t;
    const double c = d->code[i];
    if (c < 0.0) {
        const i64 f = (i64)(-c) - 1;
        /* the flow is activated after this event's completions: load its entries meanwhile */
        if (d->path_row) PREFETCH(d->path_row + f);
        if (d->fsize) PREFETCH(d->fsize + f);
        d->pending[d->np++] = i;
    } else if (c > 0.0) {
        if (heap_push(&d->heap, t + c, i)) d->err = 3;
    } else {
        d->zero[d->nz++] = i;
    }
}

static void complete_task(Dag *d, i64 i, double t) {
    d->finish[i] = t;
    for (i64 k = d->succ_ptr[i], e = d->succ_ptr[i + 1]; k < e; k++) {
        i64 s = d->succ_idx[k];
        if ((d->start[s] += 1.0) == 0.0) begin_task(d, s, t);
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

/* Tasks by code (see Dag). res (nflows, W): path rows; the task of flow row f takes row path_row[f], or
   row f when path_row is NULL (flows of one connection share a row).
   lat: per flow row, the time from its last byte to its finish; when NULL, every flow's latency and ideal
   FCT come from path_figures over its row (delay, payload, overhead, rate_bps per resource, saf) as it
   starts, and ideal (if not NULL) gets the ideal FCTs. flow_start / flow_finish (if not NULL) get the start
   and finish of every flow row, as start / finish hold them per task. size: bytes per task, or per flow
   row with size_by_flow (denser: flows that start together are near in it). stats: events, rate_updates, fill_rounds, max_active,
   reused, recomputed. Returns 0, 1 stuck tasks, 2 zero rate, 3 no memory. */
int flowsim_replay(i64 n, const double *code, const double *release, const i64 *dep_ptr,
                   const unsigned *succ_ptr, const int *succ_idx, const i64 *size, i64 nflows,
                   i64 W, const int *res, const int *path_row, const double *lat, i64 nres, const double *cap, double tol,
                   int incremental, double reuse_rtol, double level_rtol, double *start, double *finish,
                   double *drain, i64 *stats, const double *delay, const double *payload, const double *overhead,
                   const double *rate_bps, int saf, double *ideal, double *flow_start, double *flow_finish,
                   int size_by_flow, int start_ready) {
    const i64 pad = nres - 1;
    const double inf = INFINITY;
    const Hops hp = {delay, payload, overhead, rate_bps, cap, saf};
    /* A member of a resource's list is (slot << hb) | hop: its own entry of mpos, found without a scan. */
    int hb = 0;
    while (((i64)1 << hb) < W) hb++;
    const i64 hmask = ((i64)1 << hb) - 1;
    int ok = 1, rc = 0;
    Dag d;
    memset(&d, 0, sizeof d);
    d.code = code;
    d.path_row = path_row;
    d.fsize = size_by_flow ? size : NULL;
    d.succ_ptr = succ_ptr;
    d.succ_idx = succ_idx;
    d.start = start;
    d.finish = finish;
    /* Slots grow on demand (doubling): they number the flows active at once, not all flows. */
    i64 F = nflows + 1 < 1024 ? nflows + 1 : 1024;
    ALLOC(i64, zero, n) ALLOC(i64, pending, n)
    /* Per slot (stable while a flow is active). */
    ALLOC(i64, task, F) ALLOC(i64, sflow, F) ALLOC(double, slat, F) ALLOC(double, rate, F) ALLOC(double, remu, F) ALLOC(double, tu, F)
    ALLOC(DEnt, hent, F) ALLOC(i64, hpos, F)
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
    IHeap dh = {hent, hpos, 0};
    for (i64 j = 0; j < F; j++) hpos[j] = -1;
    d.zero = zero;
    d.pending = pending;
    i64 nfree = 0;
    for (i64 j = F - 1; j >= 0; j--) freel[nfree++] = j;
    /* Until task i starts, start[i] counts its unfinished dependencies, negated (exact in a double): no
       separate in-degree array, and a task's counter and start time share one cache line. */
    if (!start_ready) /* else the caller filled it (flowsim_successors) */
        for (i64 i = 0; i < n; i++) start[i] = (double)(dep_ptr[i] - dep_ptr[i + 1]);
    if (drain)
        for (i64 i = 0; i < n; i++) drain[i] = NAN;
    for (i64 i = 0; i < n; i++) {
        if (start[i] != 0.0) continue;
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
                GROW(i64, task, F, nc, 1); GROW(i64, sflow, F, nc, 1); GROW(double, slat, F, nc, 1); GROW(double, rate, F, nc, 1); GROW(double, remu, F, nc, 1);
                GROW(double, tu, F, nc, 1); GROW(DEnt, hent, F, nc, 1);
                GROW(i64, hpos, F, nc, 1); GROW(char, isnew, F, nc, 1); GROW(i64, apos, F, nc, 1);
                GROW(i64, fvis, F, nc, 1); GROW(double, low, F, nc, 1); GROW(int, ares, F, nc, W);
                GROW(i64, mpos, F, nc, W); GROW(i64, freel, F, nc, 1); GROW(i64, alist, F, nc, 1);
                GROW(i64, live, F, nc, 1); GROW(i64, newl, F, nc, 1);
                for (i64 q = F; q < nc; q++) hpos[q] = -1;
                for (i64 q = nc - 1; q >= F; q--) freel[nfree++] = q;
                dh.a = hent;
                dh.p = hpos;
                F = nc;
            }
            i64 i = pending[k], j = freel[--nfree], f = (i64)(-code[i]) - 1;
            task[j] = i;
            sflow[j] = f;
            if (flow_start) flow_start[f] = t;
            rate[j] = 0.0;
            const double bytes = (double)size[size_by_flow ? f : i];
            remu[j] = bytes;
            tu[j] = t;
            isnew[j] = 1;
            newl[nn++] = j;
            apos[j] = na;
            alist[na++] = j;
            i64 row = path_row ? path_row[f] : f;
            memcpy(ares + (i64)j * W, res + row * W, (size_t)W * sizeof(int));
            if (lat) {
                slat[j] = lat[f];
            } else {
                double best;
                path_figures(&hp, ares + (i64)j * W, W, bytes, slat + j, &best);
                if (ideal) ideal[f] = best;
            }
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
                mem[r][mlen[r]++] = (j << hb) | h;
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
                        i64 j = m[k] >> hb;
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
        double td = dh.n ? dh.a[0].k : inf;
        double th = d.heap.n ? d.heap.a[0].t : inf;
        if (td == inf && th == inf) break;
        events++;
        if (td <= th) {
            t = td;
            double lim = td + tol;
            while (dh.n && dh.a[0].k <= lim) {
                i64 j = dh.a[0].s;
                ih_remove(&dh, j);
                i64 i = task[j];
                if (drain) drain[i] = t;
                if (rate[j] < removed_min) removed_min = rate[j];
                const int *p = ares + j * W;
                for (i64 h = 0; h < W && p[h] != pad; h++) {
                    i64 r = p[h];
                    add_seed(seeds, &ns, sstamp, sid, r);
                    i64 k = mpos[j * W + h], last = mem[r][--mlen[r]];
                    if (last != ((j << hb) | h)) { /* move the list's last member into the hole */
                        mem[r][k] = last;
                        mpos[(last >> hb) * W + (last & hmask)] = k;
                    }
                    load[r] -= rate[j];
                    if (--nrated[r] == 0) load[r] = 0.0; /* no drift on idle resources */
                }
                i64 moved = alist[--na];
                alist[apos[j]] = moved;
                apos[moved] = apos[j];
                task[j] = -1;
                freel[nfree++] = j;
                double tf = t + slat[j]; /* the task completes at tf exactly (heap or zero stack) */
                if (flow_finish) flow_finish[sflow[j]] = tf;
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
        if (start[i] < 0.0) { rc = 1; break; }
    if (rc == 1) /* tasks that never started never finished */
        for (i64 i = 0; i < n; i++)
            if (start[i] < 0.0) finish[i] = NAN;
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
    free(zero); free(pending); free(task); free(sflow); free(slat); free(rate); free(remu); free(tu);
    free(hent); free(hpos);
    free(isnew); free(apos); free(fvis); free(low); free(ares); free(mpos); free(freel); free(alist); free(live);
    free(newl); free(load); free(nrated); free(nnew); free(remcap); free(share); free(cnt); free(stamp); free(ismin);
    free(notmin); free(rlist); free(tlist); free(seeds); free(sstamp); free(vstamp); free(queue); free(mlen);
    free(mcap);
    return rc;
}
"""

#: The whole kernel: shared types, heaps and path figures, the event loop, then the path and plan helpers.
SOURCE = COMMON_SOURCE + _REPLAY + PATHS_SOURCE
