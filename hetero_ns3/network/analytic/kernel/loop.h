/* The event loop's state (replay.c) and its cold parts (loop.c: allocation, slot growth, the layout of
   FlowsimReplay). Private to the kernel. */
#ifndef FLOWSIM_LOOP_H
#define FLOWSIM_LOOP_H

#include "flowsim.h"
#include "heaps.h"
#include "path-figures.h"

/* Functions shared by the kernel's files only, not exported by the library. */
#if defined(__GNUC__) || defined(__clang__)
#define FLOWSIM_INTERNAL __attribute__((visibility("hidden")))
#else
#define FLOWSIM_INTERNAL
#endif

/* What loop_step returns when no event is left. */
#define LOOP_DONE (-1)

/* The task graph's side of the loop. start[i] < 0: minus the dependencies task i still waits for (exact
   in a double): no separate in-degree array, and a task's counter and start time share a cache line. */
typedef struct {
    const double *code;
    const int *path_row; /* to prefetch a starting flow's entries (NULL: none) */
    const i64 *fsize;
    const unsigned *succ_ptr;
    const int *succ_idx;
    i64 *zero, *pending; /* tasks that finish now; flows that start now */
    i64 nz, np;
    Heap heap;
    double *start, *finish;
    int err;
} Dag;

/* State of the event loop. Slots number the flows active at once (they grow by doubling, not to all
   flows); a member of a resource's list is (slot << hb) | hop, which finds its own entry of mpos without
   a scan. */
typedef struct {
    const FlowsimReplay *in;
    Hops hp;
    Dag d;
    IHeap dh; /* drain times of the active slots */
    i64 pad, hmask;
    int hb;
    /* Per slot. */
    i64 F, nfree;
    i64 *task, *sflow, *hpos, *apos, *fvis, *mpos, *freel, *alist, *live, *newl;
    double *slat, *rate, *remu, *tu, *low;
    DEnt *hent;
    char *isnew;
    int *ares;
    /* Per resource. */
    double *load, *remcap, *share;
    i64 *nrated, *nnew, *cnt, *stamp, *rlist, *tlist, *seeds, *sstamp, *vstamp, *queue, *mlen, *mcap;
    char *ismin, *notmin;
    i64 **mem; /* members: the active flows on each resource */
    /* Scalars: active, new, seed counts; stamps; time; smallest rate removed since the last update. */
    i64 na, nn, ns, cur, sid, vid;
    double t, removed_min;
    int dirty;
    i64 events, updates, rounds, max_active, reused, recomputed;
} Loop;

/* Allocate the per-slot and per-resource arrays (zeroed) and the free-slot list; 3 when out of memory. */
FLOWSIM_INTERNAL int loop_alloc(Loop *s);

/* Free what loop_alloc and the loop allocated. */
FLOWSIM_INTERNAL void loop_free(Loop *s);

/* Double the slots (a flow starts and none is free); 3 when out of memory. */
FLOWSIM_INTERNAL int grow_slots(Loop *s);

#endif /* FLOWSIM_LOOP_H */
