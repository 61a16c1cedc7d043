/* Path and plan helpers of the analytic kernel: routing walks (flowsim_route), path figures
   (flowsim_path_stats), the dependency reversal (flowsim_successors) and the flow table of a plan
   (flowsim_flows): the per-flow passes before the event loop (replay.c). */
#include <stdlib.h>
#include <string.h>

#include "flowsim.h"
#include "path-figures.h"

/* ---- Routing: per-flow ECMP walks over dense next-hop tables (routes.py documents the contract). ---- */

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

/* Per flow: latency and ideal FCT (path_figures), and carried[r] += size over every entry of res (pad
   included) in flow-major order, as np.bincount does. W <= 128. */
void flowsim_path_stats(i64 F, i64 W, const int *res, const double *size, const double *delay,
                        const double *payload, const double *overhead, const double *rate, const double *cap,
                        int saf, double *lat, double *ideal, double *carried) {
    Hops hp = {delay, payload, overhead, rate, cap, saf};
    for (i64 f = 0; f < F; f++) {
        const int *p = res + f * W;
        for (i64 h = 0; h < W; h++) carried[p[h]] += size[f];
        path_figures(&hp, p, W, size[f], lat + f, ideal + f);
    }
}

/* Reverse a dependency CSR (engine.successors): successors of i in increasing task order, offsets as
   unsigned 32-bit integers (the caller checks that the dependencies number fewer than 2**32). The
   insertion cursors live in succ_ptr itself (each ends at the next task's start), then shift back by one.
   start (if not NULL) gets the event loop's initial dependency counters (flowsim_replay, start_ready). */
void flowsim_successors(i64 n, const i64 *dep_ptr, const int *dep_idx, unsigned *succ_ptr, int *succ_idx,
                        double *start) {
    if (start)
        for (i64 i = 0; i < n; i++) start[i] = (double)(dep_ptr[i] - dep_ptr[i + 1]);
    memset(succ_ptr, 0, (size_t)(n + 1) * sizeof(unsigned));
    i64 m = dep_ptr[n];
    for (i64 k = 0; k < m; k++) succ_ptr[dep_idx[k] + 1]++;
    for (i64 i = 0; i < n; i++) succ_ptr[i + 1] += succ_ptr[i];
    for (i64 i = 0; i < n; i++)
        for (i64 k = dep_ptr[i]; k < dep_ptr[i + 1]; k++) succ_idx[succ_ptr[dep_idx[k]]++] = (int)i;
    memmove(succ_ptr + 1, succ_ptr, (size_t)n * sizeof(unsigned));
    succ_ptr[0] = 0;
}

/* ---- The flow table of a plan (api.simulate_plan): one pass over the tasks. ---- */

/* Number of tasks with kind[i] == flow_kind. */
i64 flowsim_count_flows(i64 n, const signed char *kind, int flow_kind) {
    i64 c = 0;
    for (i64 i = 0; i < n; i++) c += kind[i] == flow_kind;
    return c;
}

/* Open-addressing table from a connection key (stored + 1, so 0 marks an empty slot) to its dense id. */
typedef struct { u64 *key; int *id; i64 mask, used; } ConnTable;

static int conn_grow(ConnTable *t) {
    i64 cap = 2 * (t->mask + 1);
    u64 *k = (u64 *)calloc((size_t)cap, sizeof(u64));
    int *v = (int *)malloc((size_t)cap * sizeof(int));
    if (!k || !v) { free(k); free(v); return 3; }
    for (i64 s = 0; s <= t->mask; s++) {
        if (!t->key[s]) continue;
        i64 q = (i64)(mix64(t->key[s]) & (u64)(cap - 1));
        while (k[q]) q = (q + 1) & (cap - 1);
        k[q] = t->key[s];
        v[q] = t->id[s];
    }
    free(t->key);
    free(t->id);
    t->key = k;
    t->id = v;
    t->mask = cap - 1;
    return 0;
}

/* Flow tasks of a plan of n tasks, in task order: fl[f] the task of flow f, flow_row[i] (if not NULL) = f
   for a flow task and -1 for the others, code[i] (if not NULL) the event loop's task code: dur[i] for a
   compute task, -(f + 1) for the task of flow f. With conn != NULL also the connection of every flow, as
   ExecutionPlan.flow_connections numbers them (dense ids in order of first appearance of the key
   (gpu, dst, category, max(chan[i], 0)): chan is ExecutionPlan.channel, -1 outside collectives), rep[c] the first flow of connection c and *nconn their number.
   Returns 0, or 3 when out of memory. */
int flowsim_flows(i64 n, const signed char *kind, int flow_kind, const int *gpu, const int *dst,
                  const short *category, const short *chan, i64 n_gpu, i64 n_cat, i64 n_chan,
                  i64 *fl, int *flow_row, int *conn, i64 *rep, i64 *nconn, const double *dur, double *code) {
    ConnTable t = {NULL, NULL, 1023, 0};
    if (conn) {
        t.key = (u64 *)calloc(1024, sizeof(u64));
        t.id = (int *)malloc(1024 * sizeof(int));
        if (!t.key || !t.id) { free(t.key); free(t.id); return 3; }
    }
    i64 f = 0, nc = 0;
    for (i64 i = 0; i < n; i++) {
        if (kind[i] != flow_kind) {
            if (flow_row) flow_row[i] = -1;
            if (code) code[i] = dur[i];
            continue;
        }
        fl[f] = i;
        if (flow_row) flow_row[i] = (int)f;
        if (code) code[i] = -(double)(f + 1);
        if (conn) {
            u64 key = (((u64)gpu[i] * (u64)n_gpu + (u64)dst[i]) * (u64)n_cat + (u64)category[i]) * (u64)n_chan
                      + (u64)(chan[i] < 0 ? 0 : chan[i]) + 1;
            i64 q = (i64)(mix64(key) & (u64)t.mask);
            while (t.key[q] && t.key[q] != key) q = (q + 1) & t.mask;
            if (!t.key[q]) {
                t.key[q] = key;
                t.id[q] = (int)nc;
                rep[nc++] = f;
                if (2 * ++t.used > t.mask && conn_grow(&t)) { free(t.key); free(t.id); return 3; }
                conn[f] = (int)(nc - 1);
            } else {
                conn[f] = t.id[q];
            }
        }
        f++;
    }
    if (conn) *nconn = nc;
    free(t.key);
    free(t.id);
    return 0;
}
