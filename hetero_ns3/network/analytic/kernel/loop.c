/* The cold parts of the event loop (loop.h): allocation, slot growth, and the layout of FlowsimReplay
   for the binding's check. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"

/* count + 1 zeroed entries of size bytes; clears *ok on failure. */
static void *zalloc(i64 count, size_t size, int *ok) {
    void *p = calloc((size_t)count + 1, size);
    if (!p) *ok = 0;
    return p;
}

/* Grow a per-slot array from oc to nc entries (times m), zero-filling the new part; NULL on failure. */
static void *grow_block(void *p, size_t size, i64 oc, i64 nc, i64 m) {
    char *g = (char *)realloc(p, (size_t)(nc * m + 1) * size);
    if (g) memset(g + (size_t)(oc * m) * size, 0, (size_t)((nc - oc) * m) * size);
    return g;
}

int loop_alloc(Loop *s) {
    const FlowsimReplay *a = s->in;
    const i64 n = a->n, W = a->W, nres = a->nres, F = a->nflows + 1 < 1024 ? a->nflows + 1 : 1024;
    int ok = 1;
    s->F = F;
#define ALLOC(field, count) s->field = zalloc((count), sizeof *s->field, &ok);
    ALLOC(d.zero, n) ALLOC(d.pending, n)
    ALLOC(task, F) ALLOC(sflow, F) ALLOC(slat, F) ALLOC(rate, F) ALLOC(remu, F) ALLOC(tu, F) ALLOC(hent, F)
    ALLOC(hpos, F) ALLOC(isnew, F) ALLOC(apos, F) ALLOC(fvis, F) ALLOC(low, F) ALLOC(ares, F * W)
    ALLOC(mpos, F * W) ALLOC(freel, F) ALLOC(alist, F) ALLOC(live, F) ALLOC(newl, F)
    ALLOC(load, nres) ALLOC(nrated, nres) ALLOC(nnew, nres) ALLOC(remcap, nres) ALLOC(share, nres)
    ALLOC(cnt, nres) ALLOC(stamp, nres) ALLOC(ismin, nres) ALLOC(notmin, nres) ALLOC(rlist, nres)
    ALLOC(tlist, nres) ALLOC(seeds, nres) ALLOC(sstamp, nres) ALLOC(vstamp, nres) ALLOC(queue, nres)
    ALLOC(mlen, nres) ALLOC(mcap, nres)
#undef ALLOC
    s->mem = (i64 **)calloc((size_t)nres, sizeof(i64 *));
    if (!s->mem || !ok) return 3;
    s->dh.a = s->hent;
    s->dh.p = s->hpos;
    for (i64 j = 0; j < F; j++) s->hpos[j] = -1;
    for (i64 j = F - 1; j >= 0; j--) s->freel[s->nfree++] = j;
    return 0;
}

void loop_free(Loop *s) {
    if (s->mem)
        for (i64 r = 0; r < s->in->nres; r++) free(s->mem[r]);
    free(s->mem);
    free(s->d.heap.a);
    free(s->d.zero); free(s->d.pending);
    free(s->task); free(s->sflow); free(s->hpos); free(s->apos); free(s->fvis); free(s->mpos); free(s->freel);
    free(s->alist); free(s->live); free(s->newl); free(s->slat); free(s->rate); free(s->remu); free(s->tu);
    free(s->low); free(s->hent); free(s->isnew); free(s->ares);
    free(s->load); free(s->remcap); free(s->share); free(s->nrated); free(s->nnew); free(s->cnt); free(s->stamp);
    free(s->rlist); free(s->tlist); free(s->seeds); free(s->sstamp); free(s->vstamp); free(s->queue);
    free(s->mlen); free(s->mcap); free(s->ismin); free(s->notmin);
}

int grow_slots(Loop *s) {
    const i64 F = s->F, nc = 2 * F, W = s->in->W;
#define GROW(field, m)                                                  \
    do {                                                                \
        void *g_ = grow_block(s->field, sizeof *s->field, F, nc, (m));  \
        if (!g_) return 3;                                              \
        s->field = g_;                                                  \
    } while (0)
    GROW(task, 1); GROW(sflow, 1); GROW(slat, 1); GROW(rate, 1); GROW(remu, 1); GROW(tu, 1); GROW(hent, 1);
    GROW(hpos, 1); GROW(isnew, 1); GROW(apos, 1); GROW(fvis, 1); GROW(low, 1); GROW(ares, W); GROW(mpos, W);
    GROW(freel, 1); GROW(alist, 1); GROW(live, 1); GROW(newl, 1);
#undef GROW
    for (i64 q = F; q < nc; q++) s->hpos[q] = -1;
    for (i64 q = nc - 1; q >= F; q--) s->freel[s->nfree++] = q;
    s->dh.a = s->hent;
    s->dh.p = s->hpos;
    s->F = nc;
    return 0;
}

i64 flowsim_replay_layout(i64 *out, i64 cap) {
    i64 k = 0;
    if (k < cap) out[k] = (i64)sizeof(FlowsimReplay);
    k++;
#define FIELD_LAYOUT(name)                                                 \
    if (k + 1 < cap) {                                                     \
        out[k] = (i64)offsetof(FlowsimReplay, name);                       \
        out[k + 1] = (i64)sizeof(((FlowsimReplay *)0)->name);              \
    }                                                                      \
    k += 2;
    FLOWSIM_REPLAY_FIELDS(FIELD_LAYOUT)
#undef FIELD_LAYOUT
    return k < cap ? k : cap;
}

const char *flowsim_replay_fields(void) {
#define FIELD_NAME(name) #name " "
    return FLOWSIM_REPLAY_FIELDS(FIELD_NAME);
#undef FIELD_NAME
}
