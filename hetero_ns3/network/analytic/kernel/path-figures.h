/* Path figures: the latency and ideal FCT of a flow on a path row, in numpy's summation order
   (hetero_ns3/analytic/routes.py, _stats_numpy), used by the event loop and flowsim_path_stats. */
#ifndef FLOWSIM_PATH_FIGURES_H
#define FLOWSIM_PATH_FIGURES_H

#include <math.h>

#include "flowsim.h"

/* Sum of x[0..n) in numpy's order for a contiguous row (np.sum(axis=1) of a C array): sequential below 8
   terms, else 8 interleaved partial sums combined pairwise, then the tail; so results match the numpy code
   bit for bit. n <= 128 (numpy splits longer rows recursively). */
static inline double np_rowsum(const double *x, i64 n) {
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
static inline void path_figures(const Hops *hp, const int *p, i64 W, double sz, double *lat, double *ideal) {
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

#endif /* FLOWSIM_PATH_FIGURES_H */
