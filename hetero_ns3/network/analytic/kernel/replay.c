/* The event loop of the analytic backend (same model as hetero_ns3/analytic/engine.py): tasks start when
   their dependencies finish, compute tasks take their durations, flows share the resources of their
   paths max-min fairly, and a flow's task finishes its latency after its last byte.

   What makes it fast (docs/analytic.md, "Performance"):
   - Active flows live in stable slots; remaining bytes are updated lazily (at rate changes only) and the
     next drain comes from an indexed heap (one entry per flow), so an event costs nothing per untouched
     flow.
   - Each resource keeps the list of its active flows, its load (sum of rates) and rated-flow count.
   - On a change, only flows that can change are recomputed: those reachable from the resources of added
     or removed flows through flows at or above the unchanged level (see engine.unchanged_level).
   - Water-filling freezes, per round, the flows of every resource whose fair share is the smallest on all
     paths through it (local-minimum rule), so rounds are few.

   The loop's state is one Loop (loop.h; allocated in loop.c); each step of an iteration is a function
   over it (see loop_step). Hot functions copy the arrays they use into locals first: stores through the
   arrays then cannot alias the state, and the compiler keeps the pointers in registers. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif

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

static void add_seed(i64 *seeds, i64 *ns, i64 *sstamp, i64 sid, i64 r) {
    if (sstamp[r] != sid) {
        sstamp[r] = sid;
        seeds[(*ns)++] = r;
    }
}

/* Dependency counters, drain times, and the tasks without dependencies: started at 0, or at their
   release time. */
static int loop_start(Loop *s) {
    const FlowsimReplay *a = s->in;
    const i64 n = a->n;
    double *start = a->start;
    if (!a->start_ready) /* else the caller filled it (flowsim_successors) */
        for (i64 i = 0; i < n; i++) start[i] = (double)(a->dep_ptr[i] - a->dep_ptr[i + 1]);
    if (a->drain)
        for (i64 i = 0; i < n; i++) a->drain[i] = NAN;
    for (i64 i = 0; i < n; i++) {
        if (start[i] != 0.0) continue;
        if (a->release && a->release[i] > 0.0) {
            if (heap_push(&s->d.heap, a->release[i], -1 - i)) return 3;
        } else {
            begin_task(&s->d, i, 0.0);
        }
    }
    return 0;
}

/* Activate the pending flows from the k-th on while free slots last: each takes a slot with its path,
   bytes, latency and resource memberships. Returns the next pending index, or -1 when out of memory. */
static i64 activate_flows(Loop *s, i64 k) {
    const FlowsimReplay *a = s->in;
    const Dag *const d = &s->d;
    const i64 W = a->W, pad = s->pad, np = d->np;
    const int hb = s->hb;
    const double t = s->t;
    const double *const code = a->code;
    const i64 *const pending = d->pending, *const size = a->size;
    const int *const path_row = a->path_row, *const res = a->res;
    double *const flow_start = a->flow_start, *const ideal = a->ideal;
    i64 *const task = s->task, *const sflow = s->sflow, *const newl = s->newl, *const apos = s->apos;
    i64 *const alist = s->alist, *const freel = s->freel, *const mpos = s->mpos, *const mlen = s->mlen;
    i64 *const mcap = s->mcap;
    i64 **const mem = s->mem;
    double *const rate = s->rate, *const remu = s->remu, *const tu = s->tu, *const slat = s->slat;
    char *const isnew = s->isnew;
    int *const ares = s->ares;
    i64 nn = s->nn, na = s->na, nfree = s->nfree;
    for (; k < np && nfree; k++) {
        i64 i = pending[k], j = freel[--nfree], f = (i64)(-code[i]) - 1;
        task[j] = i;
        sflow[j] = f;
        if (flow_start) flow_start[f] = t;
        rate[j] = 0.0;
        const double bytes = (double)size[a->size_by_flow ? f : i];
        remu[j] = bytes;
        tu[j] = t;
        isnew[j] = 1;
        newl[nn++] = j;
        apos[j] = na;
        alist[na++] = j;
        i64 row = path_row ? path_row[f] : f;
        int *const p = ares + j * W;
        memcpy(p, res + row * W, (size_t)W * sizeof(int));
        if (a->lat) {
            slat[j] = a->lat[f];
        } else {
            double best;
            path_figures(&s->hp, p, W, bytes, slat + j, &best);
            if (ideal) ideal[f] = best;
        }
        for (i64 h = 0; h < W && p[h] != pad; h++) {
            i64 r = p[h];
            if (mlen[r] == mcap[r]) {
                i64 c2 = mcap[r] ? 2 * mcap[r] : 8;
                i64 *nm = (i64 *)realloc(mem[r], (size_t)c2 * sizeof(i64));
                if (!nm) { k = -1; goto out; }
                mem[r] = nm;
                mcap[r] = c2;
            }
            mpos[j * W + h] = mlen[r];
            mem[r][mlen[r]++] = (j << hb) | h;
        }
        s->dirty = 1;
    }
out:
    s->nn = nn;
    s->na = na;
    s->nfree = nfree;
    return k;
}

/* Activate the flows that start now (doubling the slots when none is free). */
static int activate_pending(Loop *s) {
    Dag *const d = &s->d;
    i64 k = 0;
    while (k < d->np) {
        if (s->nfree == 0 && grow_slots(s)) return 3;
        if ((k = activate_flows(s, k)) < 0) return 3;
    }
    d->np = 0;
    return 0;
}

/* Lower bound of the level at which a resource crossed by new flows saturates (two of the tangents of
   engine.unchanged_level: old flows all above the level; all below it), from x0 down; seeds those
   resources. */
static double bound_new_flows(Loop *s, double x0) {
    const i64 W = s->in->W, pad = s->pad, nn = s->nn, sid = s->sid;
    const double *const cap = s->in->cap, *const load = s->load;
    const int *const ares = s->ares;
    const i64 *const newl = s->newl, *const nrated = s->nrated;
    i64 *const nnew = s->nnew, *const tlist = s->tlist, *const seeds = s->seeds, *const sstamp = s->sstamp;
    i64 nt = 0, ns = s->ns;
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
    s->ns = ns;
    return x0;
}

/* The live flows (whose rates are recomputed) into live[]: all, or with incremental those reachable from
   a changed resource (a seed) through flows at or above x0. Returns their number; clears the seeds. */
static i64 collect_live(Loop *s, double x0) {
    const i64 W = s->in->W, pad = s->pad, na = s->na;
    const int hb = s->hb;
    const double thr = x0 * (1.0 - s->in->reuse_rtol);
    i64 *const live = s->live;
    i64 nl = 0;
    if (!s->in->incremental) {
        const i64 *const alist = s->alist;
        for (i64 q = 0; q < na; q++) live[nl++] = alist[q];
    } else {
        const i64 vid = ++s->vid, ns = s->ns;
        const int *const ares = s->ares;
        const char *const isnew = s->isnew;
        const double *const rate = s->rate;
        const i64 *const seeds = s->seeds, *const mlen = s->mlen;
        i64 *const vstamp = s->vstamp, *const queue = s->queue, *const fvis = s->fvis;
        i64 *const *const mem = s->mem;
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
    s->ns = 0;
    s->sid++;
    return nl;
}

/* Residual capacities of the resources of the live flows (capacity minus the load of the flows that keep
   their rates), listed in rlist; brings the live flows' remaining bytes to now. Returns the resources'
   number. */
static i64 residual_capacities(Loop *s, i64 nl) {
    const i64 W = s->in->W, pad = s->pad, cur = ++s->cur;
    const double t = s->t;
    const double *const cap = s->in->cap;
    const int *const ares = s->ares;
    const char *const isnew = s->isnew;
    const i64 *const live = s->live;
    const double *const rate = s->rate;
    double *const remu = s->remu, *const tu = s->tu, *const remcap = s->remcap, *const load = s->load;
    i64 *const stamp = s->stamp, *const cnt = s->cnt, *const rlist = s->rlist, *const nrated = s->nrated;
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
    return nr;
}

/* Water-filling of the nl live flows over the nr resources of rlist: per round, the flows of every
   resource whose share is the smallest on all their paths get that share, and their drains move. */
static int water_fill(Loop *s, i64 nl, i64 nr) {
    const i64 W = s->in->W, pad = s->pad;
    const double t = s->t, level_rtol = s->in->level_rtol, inf = INFINITY;
    const int *const ares = s->ares;
    const i64 *const rlist = s->rlist;
    i64 *const live = s->live, *const cnt = s->cnt, *const nrated = s->nrated;
    double *const share = s->share, *const remcap = s->remcap, *const low = s->low, *const rate = s->rate;
    double *const load = s->load;
    const double *const remu = s->remu;
    char *const ismin = s->ismin, *const notmin = s->notmin;
    IHeap *const dh = &s->dh;
    i64 rounds = 0;
    int rc = 0;
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
                ih_set(dh, j, t + remu[j] / x);
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
out:
    s->rounds += rounds;
    return rc;
}

/* New max-min rates after the active set changed (flows were added or drained). */
static int update_rates(Loop *s) {
    const int incremental = s->in->incremental;
    double x0 = incremental ? s->removed_min : 0.0;
    if (incremental && s->nn) x0 = bound_new_flows(s, x0);
    const i64 nl = collect_live(s, x0);
    const i64 nr = residual_capacities(s, nl);
    s->reused += s->na - nl;
    s->recomputed += nl;
    s->updates++;
    if (s->na > s->max_active) s->max_active = s->na;
    int rc = water_fill(s, nl, nr);
    if (rc) return rc;
    for (i64 q = 0; q < s->nn; q++) s->isnew[s->newl[q]] = 0;
    s->nn = 0;
    s->removed_min = INFINITY;
    return 0;
}

/* Drain the flows whose drain time is at most lim (at time t, the earliest drain): they leave their
   resources (which become seeds) and their tasks finish their latency later. */
static int drain_flows(Loop *s, double lim) {
    const i64 W = s->in->W, pad = s->pad, hmask = s->hmask, sid = s->sid;
    const int hb = s->hb;
    const double t = s->t;
    double *const drain = s->in->drain, *const flow_finish = s->in->flow_finish;
    const i64 *const task = s->task, *const sflow = s->sflow;
    const double *const rate = s->rate, *const slat = s->slat;
    const int *const ares = s->ares;
    i64 *const seeds = s->seeds, *const sstamp = s->sstamp, *const mpos = s->mpos, *const mlen = s->mlen;
    i64 *const nrated = s->nrated, *const alist = s->alist, *const apos = s->apos, *const freel = s->freel;
    i64 *const *const mem = s->mem;
    double *const load = s->load;
    IHeap *const dh = &s->dh;
    Dag *const d = &s->d;
    i64 ns = s->ns, na = s->na, nfree = s->nfree;
    double removed_min = s->removed_min;
    int rc = 0;
    while (dh->n && dh->a[0].k <= lim) {
        i64 j = dh->a[0].s;
        ih_remove(dh, j);
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
        s->task[j] = -1;
        freel[nfree++] = j;
        double tf = t + slat[j]; /* the task completes at tf exactly (heap or zero stack) */
        if (flow_finish) flow_finish[sflow[j]] = tf;
        s->dirty = 1;
        if (tf > t) {
            if (heap_push(&d->heap, tf, i)) { rc = 3; break; }
        } else {
            d->zero[d->nz++] = i;
        }
    }
    s->ns = ns;
    s->na = na;
    s->nfree = nfree;
    s->removed_min = removed_min;
    return rc;
}

/* Move to the next event: the earliest drain or the earliest task event; runs the task events due. */
static int advance(Loop *s) {
    IHeap *const dh = &s->dh;
    Dag *const d = &s->d;
    const double td = dh->n ? dh->a[0].k : INFINITY;
    const double th = d->heap.n ? d->heap.a[0].t : INFINITY;
    if (td == INFINITY && th == INFINITY) return LOOP_DONE;
    s->events++;
    if (td <= th) {
        s->t = td;
        int rc = drain_flows(s, td + s->in->tol);
        if (rc) return rc;
    } else {
        s->t = th;
    }
    const double t = s->t;
    while (d->heap.n && d->heap.a[0].t <= t) {
        Ev e = heap_pop(&d->heap);
        if (e.code >= 0) complete_task(d, e.code, t);
        else begin_task(d, -1 - e.code, t);
    }
    return d->err;
}

/* One iteration: complete the tasks that finish now, activate the flows that start now, update the
   rates if the active set changed, advance. Returns 0, LOOP_DONE or an error code. */
static int loop_step(Loop *s) {
    Dag *const d = &s->d;
    const double t = s->t;
    while (d->nz) complete_task(d, d->zero[--d->nz], t);
    if (d->err) return d->err;
    int rc = activate_pending(s);
    if (rc) return rc;
    if (s->dirty && s->na && (rc = update_rates(s))) return rc;
    s->dirty = 0;
    return advance(s);
}

/* After the last event: tasks that never started (stuck, rc 1) never finished; the counters. */
static int loop_finish(Loop *s) {
    const FlowsimReplay *a = s->in;
    int rc = 0;
    for (i64 i = 0; i < a->n; i++)
        if (a->start[i] < 0.0) { rc = 1; break; }
    if (rc == 1)
        for (i64 i = 0; i < a->n; i++)
            if (a->start[i] < 0.0) a->finish[i] = NAN;
    i64 *st = a->stats;
    st[0] = s->events;
    st[1] = s->updates;
    st[2] = s->rounds;
    st[3] = s->max_active;
    st[4] = s->reused;
    st[5] = s->recomputed;
    return rc;
}

int flowsim_replay(const FlowsimReplay *a) {
    Loop s;
    memset(&s, 0, sizeof s);
    s.in = a;
    s.hp = (Hops){a->delay, a->payload, a->overhead, a->rate_bps, a->cap, a->saf};
    s.pad = a->nres - 1;
    while (((i64)1 << s.hb) < a->W) s.hb++;
    s.hmask = ((i64)1 << s.hb) - 1;
    s.d.code = a->code;
    s.d.path_row = a->path_row;
    s.d.fsize = a->size_by_flow ? a->size : NULL;
    s.d.succ_ptr = a->succ_ptr;
    s.d.succ_idx = a->succ_idx;
    s.d.start = a->start;
    s.d.finish = a->finish;
    s.sid = 1;
    s.removed_min = INFINITY;
    int rc = loop_alloc(&s);
    if (!rc) rc = loop_start(&s);
    while (!rc) rc = loop_step(&s);
    if (rc == LOOP_DONE) rc = loop_finish(&s);
    loop_free(&s);
    return rc;
}
