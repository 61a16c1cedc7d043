/* The analytic backend's C kernel ("flowsim"): its exported functions and the argument struct of the
   event loop. Plain C99, no ns-3, no Python API; hetero_ns3/analytic/native.py builds it with the
   package's native builder and binds it through ctypes (ReplayArgs mirrors FlowsimReplay, and a unit
   test checks the two layouts against flowsim_replay_layout). */
#ifndef FLOWSIM_H
#define FLOWSIM_H

typedef long long i64;
typedef unsigned long long u64;

/* Arguments of flowsim_replay: a plan's tasks, its flows' paths, the settings and the outputs. */
typedef struct FlowsimReplay {
    /* Tasks. */
    i64 n;                    /* number of tasks */
    const double *code;       /* per task: its duration (>= 0) for a compute task, -(f + 1) for the task of
                                 flow row f (exact in a double) */
    const double *release;    /* per task: earliest start (s), or NULL (all 0) */
    const i64 *dep_ptr;       /* dependency CSR offsets, n + 1 */
    const unsigned *succ_ptr; /* successor CSR offsets, n + 1 (flowsim_successors) */
    const int *succ_idx;      /* successors of every task, in increasing task order */
    const i64 *size;          /* bytes per task, or per flow row with size_by_flow */
    /* Flows and resources. */
    i64 nflows;               /* rows of res */
    i64 W;                    /* entries per path row, padding included */
    const int *res;           /* (nflows, W) resources of each path row, padded with nres - 1 */
    const int *path_row;      /* per flow row: the row of res it takes (flows of one connection share a
                                 row), or NULL (row f) */
    const double *lat;        /* per flow row: time from its last byte to its finish (s), or NULL: every
                                 flow's latency and ideal FCT come from path_figures over its row */
    i64 nres;                 /* resources, the padding resource (nres - 1) included */
    const double *cap;        /* per resource: capacity */
    const double *delay;      /* per resource, used when lat is NULL: propagation delay (s), */
    const double *payload;    /*   payload and overhead bytes of a packet, */
    const double *overhead;
    const double *rate_bps;   /*   line rate (bit/s) */
    /* Settings. */
    double tol;               /* drains within tol (s) of the earliest one happen with it */
    double reuse_rtol;        /* incremental max-min: relative margin of the unchanged level */
    double level_rtol;        /* water-filling: shares within this relative distance are equal */
    int incremental;          /* recompute only the flows that can change */
    int saf;                  /* store-and-forward hops (latencies computed from the path) */
    int size_by_flow;         /* size is per flow row (else per task) */
    int start_ready;          /* start already holds the dependency counters (flowsim_successors) */
    /* Outputs. */
    double *start, *finish;   /* per task (s); finish may be code itself: a task's code is read only until
                                 it starts, its finish written after that */
    double *drain;            /* per task: when its last byte left (flows), or NULL */
    double *ideal;            /* per flow row: ideal FCT when lat is NULL, or NULL */
    double *flow_start;       /* per flow row: start and finish (s), or NULL */
    double *flow_finish;
    i64 *stats;               /* 8 entries: events, rate updates, fill rounds, max active, reused,
                                 recomputed */
} FlowsimReplay;

/* The fields of FlowsimReplay in declaration order (for the layout check). */
#define FLOWSIM_REPLAY_FIELDS(X)                                                                  \
    X(n) X(code) X(release) X(dep_ptr) X(succ_ptr) X(succ_idx) X(size) X(nflows) X(W) X(res)       \
    X(path_row) X(lat) X(nres) X(cap) X(delay) X(payload) X(overhead) X(rate_bps) X(tol)           \
    X(reuse_rtol) X(level_rtol) X(incremental) X(saf) X(size_by_flow) X(start_ready) X(start)     \
    X(finish) X(drain) X(ideal) X(flow_start) X(flow_finish) X(stats)

/* Replay a plan (same model as hetero_ns3/analytic/engine.py). Returns 0, 1 stuck tasks (their finish is
   NaN), 2 a zero rate, 3 out of memory. */
int flowsim_replay(const FlowsimReplay *a);

/* Layout of FlowsimReplay: out[0] = sizeof, then (offsetof, sizeof) of every field of
   FLOWSIM_REPLAY_FIELDS; writes at most cap entries and returns how many it has. */
i64 flowsim_replay_layout(i64 *out, i64 cap);

/* The field names of FLOWSIM_REPLAY_FIELDS, separated by spaces. */
const char *flowsim_replay_fields(void);

/* Path and plan helpers (paths.c). */
int flowsim_route(i64 F, const i64 *src, const i64 *dst, const i64 *key, i64 N, i64 S, const i64 *dslot,
                  const i64 *nh_off, const int *nh_cnt, const int *nh_link, const i64 *la, const i64 *lb, int mode,
                  u64 seedw, i64 W, int pad, int *res, int *hops, i64 *need, i64 *bad);
void flowsim_narrow(i64 F, i64 W, i64 w, int *res);
void flowsim_path_stats(i64 F, i64 W, const int *res, const double *size, const double *delay,
                        const double *payload, const double *overhead, const double *rate, const double *cap,
                        int saf, double *lat, double *ideal, double *carried);
void flowsim_successors(i64 n, const i64 *dep_ptr, const int *dep_idx, unsigned *succ_ptr, int *succ_idx,
                        double *start);
i64 flowsim_count_flows(i64 n, const signed char *kind, int flow_kind);
int flowsim_flows(i64 n, const signed char *kind, int flow_kind, const int *gpu, const int *dst,
                  const short *category, const short *chan, i64 n_gpu, i64 n_cat, i64 n_chan,
                  i64 *fl, int *flow_row, int *conn, i64 *rep, i64 *nconn, const double *dur, double *code);

#endif /* FLOWSIM_H */
