/* check.c -- the checker's core: abstract values and state, the undo trail
 * that analyses both arms of an `if` and joins them, statements and
 * expressions. Fabric's semantics are in fabric/ (reached via paths.c and api_*.c);
 * nothing here runs anything. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "check_int.h"
#include "pynames.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- memory ------------------------------------------------------------ */

/* A table's growth is paid from the budget as the arena's is. */
#define GROW(cc, arr, n, cap) do { if ((n) == (cap)) { spend((cc), ((cap) ? (cap) : 64) * sizeof *(arr)); \
  (cap) = (cap) ? 2 * (cap) : 64; (arr) = fsA_xrealloc((arr), (cap) * sizeof *(arr)); } } while (0)

/* ---- the budget: check always ends ---------------------------------------
 * Analysing a call inlines the def, and a loop's body is analysed per round,
 * so nested calls and loops multiply: 30 defs that each call the next twice
 * are 2^30 analyses. Time and memory are bounded instead of the shapes: what
 * the analysis takes is paid from the budget, and once it is spent no further
 * statement is analysed (one warning says where). A value too big for what
 * is left is unknown (not_affordable), so a valid script never makes the
 * check run out of memory. */

static void spend(C *c, size_t n) {
  if (n >= c->bytes_left) { c->bytes_left = 0; c->spent = 1; }
  else c->bytes_left -= n;
}

/* The process's processor time, not the wall clock: a check on a loaded
 * machine (a CI runner, a laptop compiling) is not cut short by the load,
 * so whether it ends early does not depend on what else runs. */
static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The monotonic clock, which the C library reads without entering the
 * kernel; the processor-time clock is a system call (about a microsecond
 * here: a big check read it 1,200 times). The check runs on one thread, so
 * its processor time cannot grow faster than the wall clock: until as much
 * wall time has passed since the last reading as the budget had left then,
 * the budget cannot be spent and the processor clock is not read. */
static uint64_t wall_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Whether the budget is spent, checked before each statement (the clock
 * every 64); says so once, at the statement where the analysis stops. */
static int budget_spent(C *c, const fs_node *s);
static inline int out_of_budget(C *c, const fs_node *s) {
  return (c->spent || ++c->ticks >= 64) && budget_spent(c, s); /* inline: called before each statement */
}

static int budget_spent(C *c, const fs_node *s) {
  if (!c->spent && c->ticks >= 64) {
    c->ticks = 0;
    uint64_t wall = wall_ns();
    if (c->cpu_read_ns + (wall - c->wall_read_ns) >= c->deadline_ns) {
      c->cpu_read_ns = now_ns();
      c->wall_read_ns = wall;
      if (c->cpu_read_ns >= c->deadline_ns) c->spent = 1;
    }
  }
  if (!c->spent) return 0;
  if (c->spent == 1) {
    c->spent = 2;
    int timed_out = c->bytes_left > 0;
    const char *nl = memchr(c->src->text + s->loc.start, '\n', s->loc.end - s->loc.start);
    fs_loc at = {s->loc.start, nl ? (uint32_t)(nl - c->src->text) : s->loc.end};
    double secs = c->o->budget_seconds > 0 ? c->o->budget_seconds : FSC_BUDGET_SECONDS;
    size_t bytes = c->o->budget_bytes ? c->o->budget_bytes : FSC_BUDGET_BYTES;
    char what[64];
    if (timed_out) snprintf(what, sizeof what, "%g s", secs);
    else if (bytes % (1u << 30) == 0) snprintf(what, sizeof what, "%zu GiB", bytes >> 30);
    else snprintf(what, sizeof what, "%zu MiB", bytes >> 20);
    fs_diag *g = fsC_report(c, FS_SEV_WARNING, "budget", at, "the check's budget of %s is spent: the analysis "
                            "stops here; what runs after this point, and every function not analysed yet, "
                            "is not checked", what);
    if (g) fsD_help(g, "`--check-budget=SECONDS[,BYTES]` gives the check more (the default is 10 s and 1 GiB)");
  }
  return 1;
}

void *fsC_alloc(C *c, size_t n) {
  if (!c->arena) c->arena = fsA_arena_new();
  spend(c, n);
  return fsA_alloc(c->arena, n);
}

void fsC_argbuf_alloc(C *c, fsC_argbuf *b, size_t npos, size_t nkw) {
  b->pos = (cv *)fsC_alloc(c, (npos + 2) * sizeof *b->pos) + 1;
  b->kwv = fsC_alloc(c, (nkw + 1) * sizeof *b->kwv);
  b->kw = fsC_alloc(c, (nkw + 1) * sizeof *b->kw);
  b->ps = fsC_alloc(c, (npos + 1) * sizeof *b->ps);
  b->ks = fsC_alloc(c, (nkw + 1) * sizeof *b->ks);
}

char *fsC_text(C *c, fs_loc loc) {
  size_t n = loc.end > loc.start ? loc.end - loc.start : 0;
  char *s = fsC_alloc(c, n + 1);
  memcpy(s, c->src->text + loc.start, n);
  s[n] = 0;
  return s;
}

/* ---- values ------------------------------------------------------------ */

cv fsC_unknown(void) { return (cv){.k = CV_UNKNOWN}; }
cv fsC_obj(uint32_t id) { return (cv){.k = CV_OBJ, .id = id}; }

/* Immortal values in the arena: literals cost no malloc and no release. */
static fs_value *arena_value(C *c, fs_vtype t) {
  fs_value *v = fsC_alloc(c, sizeof *v);
  memset(v, 0, sizeof *v);
  v->refcount = -1;
  v->type = t;
  return v;
}

/* A def's or model's literals are evaluated again at each call: small ints
 * are made once per check. */
cv fsC_int(C *c, int64_t i) {
  fs_value **small = i >= 0 && i < SMALL_INTS ? &c->small_ints[i] : NULL;
  fs_value *v = small && *small ? *small : arena_value(c, FSV_INT);
  v->u.i = i;
  if (small) *small = v;
  return (cv){.k = CV_CONST, .p = v};
}

static cv const_float(C *c, double f) {
  fs_value *v = arena_value(c, FSV_FLOAT);
  v->u.f = f;
  return (cv){.k = CV_CONST, .p = v};
}

/* A computed number moves into the arena and its malloc'd value goes back
 * at once: the next one reuses that memory, not fresh pages. */
cv fsC_const(C *c, fs_value *v) {
  if (!v) return fsC_unknown();
  if (v->refcount >= 0 && (v->type == FSV_INT || v->type == FSV_FLOAT)) {
    cv r = v->type == FSV_INT ? fsC_int(c, v->u.i) : const_float(c, v->u.f);
    fsV_release(v);
    return r;
  }
  if (v->refcount >= 0) {
    GROW(c, c->consts, c->nconsts, c->capconsts);
    c->consts[c->nconsts++] = v;
  }
  return (cv){.k = CV_CONST, .p = v};
}

/* A string literal: the text stays in the AST, which outlives the check. */
static cv str_lit(C *c, const fs_node *n) {
  fs_value *v = arena_value(c, FSV_STR);
  v->u.str.s = n->str;
  v->u.str.len = n->slen;
  return (cv){.k = CV_CONST, .p = v};
}

static cv seq(C *c, const cv *items, size_t n, int tuple) {
  cv *a = fsC_alloc(c, (n ? n : 1) * sizeof *a);
  if (n) memcpy(a, items, n * sizeof *a);
  return (cv){.k = CV_SEQ, .sub = (uint8_t)tuple, .n = (uint32_t)n, .p = a};
}

static int cv_eq(const cv *a, const cv *b) {
  if (a->k != b->k) return 0;
  switch (a->k) {
  case CV_UNDEF: case CV_UNKNOWN: return 1;
  case CV_CONST: return a->p == b->p || fsV_equal(a->p, b->p);
  case CV_OBJ: case CV_TENSOR: return a->id == b->id;
  default: return a->p == b->p && a->n == b->n && a->id == b->id && a->sub == b->sub;
  }
}

/* The value on either of two paths; `why` names the branch. */
static cv cv_join(C *c, const cv *a, const cv *b, uint32_t why) {
  if (cv_eq(a, b)) return *a;
  cv alts[2 * MAXALT];
  size_t n = 0;
  const cv *two[2] = {a, b};
  for (int s = 0; s < 2; s++) {
    const cv *v = two[s];
    size_t k = v->k == CV_PHI ? v->n : 1;
    const cv *items = v->k == CV_PHI ? v->p : v;
    for (size_t i = 0; i < k; i++) {
      size_t j = 0;
      while (j < n && !cv_eq(&alts[j], &items[i])) j++;
      if (j == n) {
        if (n == MAXALT) return fsC_unknown();
        alts[n++] = items[i];
      }
    }
  }
  cv r = seq(c, alts, n, 0);
  r.k = CV_PHI;
  r.id = why;
  return r;
}

/* Adds v to alts[0..*n) unless there; 0 when there are MAXALT already. */
static int add_alt(cv *alts, size_t *n, const cv *v) {
  for (size_t j = 0; j < *n; j++) if (cv_eq(&alts[j], v)) return 1;
  if (*n == MAXALT) return 0;
  alts[(*n)++] = *v;
  return 1;
}

/* The objects v may be stand for several (cobj.many). */
static void mark_many(C *c, const cv *v) {
  if (v->k == CV_PHI)
    for (uint32_t i = 0; i < v->n; i++) mark_many(c, &((const cv *)v->p)[i]);
  else if (v->k == CV_OBJ && !c->objs[v->id].many)
    fsC_ow(c, v->id)->many = 1;
}

cv fsC_unsized_seq(C *c, const cv *items, size_t n, int tuple) {
  cv alts[MAXALT];
  size_t k = 0;
  for (size_t i = 0; i < n; i++) mark_many(c, &items[i]);
  for (size_t i = 0; i < n; i++)
    if (!add_alt(alts, &k, &items[i])) { /* too many to tell apart: some are unknown */
      alts[MAXALT - 1] = fsC_unknown();
      break;
    }
  cv r = seq(c, alts, k, tuple);
  r.sub |= SEQ_UNSIZED;
  return r;
}

/* One value for "any of these" (a phi), unknown past MAXALT or for none. */
static cv join_all(C *c, const cv *items, size_t n) {
  if (!n) return fsC_unknown();
  cv r = items[0];
  for (size_t i = 1; i < n && r.k != CV_UNKNOWN; i++) r = cv_join(c, &r, &items[i], 0);
  return r;
}

cv fsC_elements(C *c, const cv *v) {
  switch (v->k) {
  case CV_SEQ: return join_all(c, v->p, v->n);
  case CV_DICT: return join_all(c, v->p, v->n); /* its keys */
  case CV_PHI: {
    cv parts[MAXALT];
    for (uint32_t i = 0; i < v->n; i++) parts[i] = fsC_elements(c, &((const cv *)v->p)[i]);
    return join_all(c, parts, v->n);
  }
  case CV_OBJ:
    if (c->objs[v->id].kind == OB_PARAMS) { /* a parameter: whose it is, on which device */
      cobj p = c->objs[v->id];
      uint32_t id = fsC_new_obj(c, OB_PARAM, p.loc);
      p.kind = OB_PARAM;
      p.effect = 0;
      c->objs[id] = p;
      if (!c->objs[v->id].effect) return fsC_obj(id);
      cv *pair = fsC_alloc(c, 2 * sizeof *pair); /* named_parameters(): (name, parameter) */
      pair[0] = fsC_unknown();
      pair[1] = fsC_obj(id);
      return (cv){.k = CV_SEQ, .sub = SEQ_TUPLE, .n = 2, .p = pair};
    }
    return fsC_unknown();
  default: return fsC_unknown();
  }
}

/* ---- rank-dependent values ------------------------------------------------
 * Each process of a run reads its own fabric.global_rank, local_rank,
 * node_rank and is_global_zero: such a value is a phi with one alternative
 * per rank (RANKED), operators apply rank by rank, and an `if` on it is
 * analysed once for the ranks that take each arm, with rank_mask saying
 * which. A world size known up to MAXRANKS gives one alternative per rank; an
 * unknown or larger one gives two: rank 0, and every other rank as one. */

static int ranked(const cv *v) { return v->k == CV_PHI && v->sub == RANKED; }
static cv rank_alt(const cv *v, uint32_t i) { return ranked(v) ? ((const cv *)v->p)[i] : *v; }
static uint32_t all_ranks(const C *c) { return c->rank_n >= 32 ? ~0u : (1u << c->rank_n) - 1; }
/* Whether the current path is not taken by every rank. */
static int rank_restricted(const C *c, uint32_t mask) { return c->rank_n > 1 && (mask & all_ranks(c)) != all_ranks(c); }

/* One value per rank; a constant when every rank has the same. */
static cv from_ranks(C *c, const cv *alts) {
  uint32_t i = 1;
  while (i < c->rank_n && cv_eq(&alts[0], &alts[i])) i++;
  if (i == c->rank_n) return alts[0];
  cv r = seq(c, alts, c->rank_n, 0);
  r.k = CV_PHI;
  r.sub = RANKED;
  r.id = 0;
  return r;
}

/* fabric.<name> for a rank attribute: 1 and *out. */
static int rank_value(C *c, uint32_t fid, const char *name, cv *out) {
  int g = !strcmp(name, "global_rank"), l = !strcmp(name, "local_rank"), nr = !strcmp(name, "node_rank"),
      zero = !strcmp(name, "is_global_zero");
  if (!(g || l || nr || zero)) return 0;
  const fsF_config *cfg = fsC_cfg(c, fid);
  if (!c->rank_n) {
    int w = cfg ? cfg->world_size : 0;
    c->rank_open = !(w >= 1 && w <= MAXRANKS);
    c->rank_n = c->rank_open ? 2 : (uint32_t)w;
  }
  int per_node = cfg && cfg->devices > 0 && cfg->num_nodes >= 1 ? cfg->devices : 0;
  cv alts[MAXRANKS];
  for (uint32_t i = 0; i < c->rank_n; i++) {
    int other = c->rank_open && i == c->rank_n - 1; /* some rank but 0: which, not known */
    if (zero) alts[i] = fsC_const(c, fsV_bool(i == 0));
    else if (other && i != 0) alts[i] = fsC_unknown();
    else if (g) alts[i] = fsC_int(c, i);
    else if (!per_node) alts[i] = i == 0 ? fsC_int(c, 0) : fsC_unknown();
    else alts[i] = fsC_int(c, l ? (int64_t)i % per_node : (int64_t)i / per_node);
  }
  *out = from_ranks(c, alts);
  return 1;
}


/* "rank 1", "ranks 1 and 3", "the ranks other than 0". */
static void ranks_text(const C *c, uint32_t mask, char *buf, size_t len) {
  mask &= all_ranks(c);
  if (c->rank_open && mask == 2) { snprintf(buf, len, "the ranks other than 0"); return; }
  uint32_t n = 0, k = 0;
  for (uint32_t i = 0; i < c->rank_n; i++) n += (mask >> i) & 1;
  size_t at = (size_t)snprintf(buf, len, "rank%s", n > 1 ? "s" : "");
  for (uint32_t i = 0; i < c->rank_n && at < len; i++) {
    if (!((mask >> i) & 1)) continue;
    const char *sep = ++k == 1 ? " " : k == n ? " and " : ", ";
    if (c->rank_open && i == c->rank_n - 1) at += (size_t)snprintf(buf + at, len - at, "%sthe others", sep);
    else at += (size_t)snprintf(buf + at, len - at, "%s%u", sep, i);
  }
}

/* A note on g: it concerns only the ranks in mask, split off at rank_why. */
static void rank_note(C *c, fs_diag *g, uint32_t mask) {
  char who[96];
  ranks_text(c, mask, who, sizeof who);
  if (c->rank_open) fsD_note(g, c->src, c->rank_why, "only on %s: this condition depends on the rank", who);
  else fsD_note(g, c->src, c->rank_why, "only on %s (of %u): this condition depends on the rank", who, c->rank_n);
}

static mbit mb_join(mbit a, mbit b, uint32_t ra, uint32_t rb) {
  mbit r = {(uint8_t)(a.m | b.m), a.why ? a.why : b.why};
  if ((a.m & MB_T) && !(b.m & MB_T)) r.why = ra;
  else if ((b.m & MB_T) && !(a.m & MB_T)) r.why = rb;
  return r;
}

static cobj cobj_join(const cobj *a, const cobj *b, uint32_t ra, uint32_t rb) {
  cobj r = *a;
  r.meta = mb_join(a->meta, b->meta, ra, rb);
  r.empty = mb_join(a->empty, b->empty, ra, rb);
  r.launched = mb_join(a->launched, b->launched, ra, rb);
  r.setups_lo = a->setups_lo < b->setups_lo ? a->setups_lo : b->setups_lo;
  r.setups_hi = a->setups_hi > b->setups_hi ? a->setups_hi : b->setups_hi;
  return r;
}


/* A hash table's memory: malloc'd while small, from the arena (paid from the
 * budget, freed with it) past TABLE_BIG bytes, where a big script's tables
 * grow on huge pages instead of faulting in fresh small ones. */
#define TABLE_BIG ((size_t)64 << 10)
static void *table_alloc(C *c, size_t bytes) {
  void *t = bytes < TABLE_BIG ? fsA_xrealloc(NULL, bytes) : fsC_alloc(c, bytes);
  memset(t, 0, bytes);
  return t;
}
static void table_free(void *t, size_t bytes) {
  if (bytes < TABLE_BIG) free(t);
}

/* The reason for a branch's side: made once per branch, though a loop or a
 * def analyses the branch again and again (2^26 nested loop rounds once made
 * 2^27 reasons, a gigabyte). Found by its numbers in a table of their own:
 * a string key (snprintf, then hashing and comparing it) cost a Python check
 * of many loops and ifs 2% of its instructions. */
typedef struct reason_slot { uint32_t start, end, id; uint8_t loop, side; } reason_slot;

static size_t reason_hash(fs_loc loc, int loop, int side) {
  uint64_t k = ((uint64_t)loc.start << 32 | loc.end) * 0x9E3779B97F4A7C15u;
  return (size_t)((k >> 29) ^ (k >> 7) ^ (uint64_t)(loop * 2 + side));
}

static uint32_t new_reason(C *c, fs_loc loc, int loop, int side) {
  if ((c->nreason_ids + 1) * 2 > c->capreason_ids) { /* id 0: an empty slot (0 is "no reason") */
    size_t cap = c->capreason_ids ? 2 * c->capreason_ids : 16;
    reason_slot *t = table_alloc(c, cap * sizeof *t);
    for (size_t i = 0; i < c->capreason_ids; i++) {
      const reason_slot *r = &c->reason_ids[i];
      if (!r->id) continue;
      size_t j = reason_hash((fs_loc){r->start, r->end}, r->loop, r->side) & (cap - 1);
      while (t[j].id) j = (j + 1) & (cap - 1);
      t[j] = *r;
    }
    table_free(c->reason_ids, c->capreason_ids * sizeof *t);
    c->reason_ids = t;
    c->capreason_ids = cap;
  }
  size_t j = reason_hash(loc, loop, side) & (c->capreason_ids - 1);
  for (reason_slot *r; (r = &c->reason_ids[j])->id; j = (j + 1) & (c->capreason_ids - 1))
    if (r->start == loc.start && r->end == loc.end && r->loop == loop && r->side == side) return r->id;
  GROW(c, c->reasons, c->nreasons, c->capreasons);
  c->reasons[c->nreasons] = (reason){loc, (uint8_t)loop, (uint8_t)side};
  c->reason_ids[j] = (reason_slot){loc.start, loc.end, (uint32_t)c->nreasons, (uint8_t)loop, (uint8_t)side};
  c->nreason_ids++;
  return (uint32_t)c->nreasons++;
}

void fsC_note_why(C *c, fs_diag *g, uint32_t why) {
  if (!why || !g) return;
  const reason *r = &c->reasons[why];
  fsD_note(g, c->src, r->loc, "%s",
           r->loop ? (r->side == 1 ? "on the paths where this loop has run at least once"
                                   : "on the paths where this loop has not run")
                   : (r->side == 1 ? "on the paths where this condition is true"
                                   : "on the paths where this condition is false"));
}

/* ---- objects and variables, with the undo trail ------------------------- */

enum { TR_SLOT, TR_OBJ };

static void log_old(C *c, int type, uint32_t idx) {
  if (!c->marks) return;
  GROW(c, c->trail, c->ntrail, c->captrail);
  trail_ent *t = &c->trail[c->ntrail++];
  t->type = (uint8_t)type;
  t->idx = idx;
  if (type == TR_SLOT) t->old.v = c->slots[idx];
  else t->old.o = c->objs[idx];
}

uint32_t fsC_new_obj(C *c, obk kind, fs_loc loc) {
  GROW(c, c->objs, c->nobjs, c->capobjs);
  cobj *o = &c->objs[c->nobjs];
  memset(o, 0, sizeof *o);
  o->kind = (uint8_t)kind;
  o->loc = loc;
  o->stmt = c->stmt;
  o->meta = o->empty = o->launched = o->pmeta = (mbit){MB_F, 0};
  o->cfg = -1;
  return (uint32_t)c->nobjs++;
}

cobj *fsC_o(C *c, uint32_t id) { return &c->objs[id]; }

cobj *fsC_ow(C *c, uint32_t id) {
  log_old(c, TR_OBJ, id);
  return &c->objs[id];
}

const fsF_config *fsC_cfg(C *c, uint32_t fabric) {
  int i = c->objs[fabric].cfg;
  return i < 0 ? NULL : &c->cfgs[i];
}

int fsC_is(const cv *v, obk kind, C *c) { return v->k == CV_OBJ && c->objs[v->id].kind == kind; }

typedef struct nm_ent { const char *key; uint32_t hash, len; uintptr_t val; } nm_ent;

/* A map key: its bytes, their length and hash_mem. Made once for a name
 * looked up in several maps, or looked up and then added. */
typedef struct nkey { const char *s; uint32_t len, hash; } nkey;

static uint64_t read64(const char *p) { uint64_t w; memcpy(&w, p, 8); return w; }
static uint64_t read32(const char *p) { uint32_t w; memcpy(&w, p, 4); return w; }

/* FNV-1a over n bytes. Where a map's entries lie follows from it, and so
 * the order in which a "did you mean" looks at the names bound (the first
 * of the nearest wins): a faster word-at-a-time hash saved little and
 * changed which name some suggestions gave. */
static inline __attribute__((always_inline)) uint32_t hash_mem(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (; n; s++, n--) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* Whether n bytes at x and y are the same (the hashes matched already). */
static inline __attribute__((always_inline)) int same_bytes(const char *x, const char *y, uint32_t n) {
  if (n >= 8 && n <= 16) return read64(x) == read64(y) && read64(x + n - 8) == read64(y + n - 8);
  if (n >= 4 && n < 8) return read32(x) == read32(y) && read32(x + n - 4) == read32(y + n - 4);
  return !memcmp(x, y, n);
}

static inline __attribute__((always_inline)) nkey key_mem(const char *s, size_t n) { return (nkey){s, (uint32_t)n, hash_mem(s, n)}; }
static nkey key_str(const char *s) { return key_mem(s, strlen(s)); }
/* A NAME node's text, whose length the lexer recorded. */
static nkey key_name(const fs_node *n) { return key_mem(n->str, n->slen); }

/* Small tables are malloc'd, so the maps of frames reuse warm memory, and a
 * frame's table is kept for the next frame when it is left (a malloc, a
 * free and their bookkeeping for each of the many calls a big script's
 * analysis makes cost more than clearing the table); a table past MAP_BIG
 * entries is in the arena, where a big script's globals grow on huge pages. */
#define MAP_BIG 4096u
static int spare_class(size_t cap) { return __builtin_ctzll(cap) - 4; } /* 16 << class == cap */

static void map_free(C *c, name_map *m) {
  if (!m->e || m->cap >= MAP_BIG) return;
  int k = spare_class(m->cap);
  if (k >= 0 && k < 8 && c->nspare[k] < 8) c->spare[k][c->nspare[k]++] = m->e;
  else free(m->e);
}

/* Rehashes m into cap entries (a power of two, at least 16). */
static void map_grow(C *c, name_map *m, size_t cap) {
  int k = cap < MAP_BIG ? spare_class(cap) : -1;
  nm_ent *e = k >= 0 && k < 8 && c->nspare[k] ? c->spare[k][--c->nspare[k]]
            : cap < MAP_BIG ? fsA_xrealloc(NULL, cap * sizeof *e) : fsC_alloc(c, cap * sizeof *e);
  memset(e, 0, cap * sizeof *e);
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->e[i].key) continue;
    size_t j = m->e[i].hash & (cap - 1);
    while (e[j].key) j = (j + 1) & (cap - 1);
    e[j] = m->e[i];
  }
  map_free(c, m);
  m->e = e;
  m->cap = cap;
}

/* The value of k in m, or NULL. With `create`, a missing key is added (the
 * map keeps the pointer k->s: it must outlive the map) with value 0 and
 * *fresh set. */
static inline __attribute__((always_inline)) uintptr_t *map_slot(C *c, name_map *m, const nkey *k, int create, int *fresh) {
  if (create && (m->n + 1) * 2 > m->cap) map_grow(c, m, m->cap ? 2 * m->cap : 16);
  if (!m->cap) return NULL;
  size_t j = k->hash & (m->cap - 1);
  for (; m->e[j].key; j = (j + 1) & (m->cap - 1))
    if (m->e[j].hash == k->hash && m->e[j].len == k->len && same_bytes(m->e[j].key, k->s, k->len)) return &m->e[j].val;
  if (!create) return NULL;
  m->e[j] = (nm_ent){k->s, k->hash, k->len, 0};
  m->n++;
  *fresh = 1;
  return &m->e[j].val;
}

/* The slot of variable k where the current scope reads it, or NULL. */
static uintptr_t *var_slot(C *c, const nkey *k) {
  uintptr_t *s = c->nframes ? map_slot(c, &c->frames[c->nframes - 1]->locals, k, 0, NULL) : NULL;
  /* a closure's free name: the enclosing def's, when it is the caller (as
   * when a nested def is called where it is defined) */
  for (int i = c->nframes - 1; !s && i > 0 && c->frames[i]->closure; i--)
    s = map_slot(c, &c->frames[i - 1]->locals, k, 0, NULL);
  return s ? s : map_slot(c, &c->globals, k, 0, NULL);
}

/* Binds variable k in the current scope (k->s must outlive the check: the tree's text). */
static void setvar(C *c, const nkey *k, cv v) {
  name_map *m = c->nframes ? &c->frames[c->nframes - 1]->locals : &c->globals;
  int fresh = 0;
  uintptr_t *s = map_slot(c, m, k, 1, &fresh);
  if (fresh) {
    GROW(c, c->slots, c->nslots, c->capslots);
    c->slots[c->nslots] = (cv){.k = CV_UNDEF};
    *s = c->nslots++;
  }
  log_old(c, TR_SLOT, (uint32_t)*s);
  c->slots[*s] = v;
}

void fsC_setvar(C *c, const char *name, cv v) {
  nkey k = key_str(name);
  setvar(c, &k, v);
}

/* Writes name where it is bound (a global from inside a def, the enclosing
 * def's from a closure), as mutating the container it names would: xs[k] = v
 * and xs.append(v) make no local. Unbound: as fsC_setvar. */
void fsC_rebind(C *c, const char *name, cv v) {
  nkey k = key_str(name);
  uintptr_t *s = var_slot(c, &k);
  if (!s) { setvar(c, &k, v); return; }
  log_old(c, TR_SLOT, (uint32_t)*s);
  c->slots[*s] = v;
}

/* A region whose writes can be captured and undone. */
typedef struct chg { uint8_t type; uint32_t idx; union { cv v; cobj o; } val; } chg;
typedef struct chgset { chg *a; size_t n, cap; uint32_t epoch; } chgset;

/* A change array of room for at least n, a left one reused where one is big
 * enough: every if and loop records two, and their malloc and free were 3%
 * of a big check. */
static chg *chg_take(C *c, size_t n, size_t *cap) {
  for (int i = 0; i < c->nspare_chg; i++)
    if (c->spare_chg_cap[i] >= n) {
      chg *a = c->spare_chg[i];
      *cap = c->spare_chg_cap[i];
      c->nspare_chg--;
      c->spare_chg[i] = c->spare_chg[c->nspare_chg];
      c->spare_chg_cap[i] = c->spare_chg_cap[c->nspare_chg];
      return a;
    }
  *cap = n < 16 ? 16 : n;
  return fsA_xrealloc(NULL, *cap * sizeof(chg));
}

static void chg_give(C *c, chgset *s) {
  if (!s->a) return;
  if (c->nspare_chg < 8) {
    c->spare_chg[c->nspare_chg] = s->a;
    c->spare_chg_cap[c->nspare_chg++] = s->cap;
  } else {
    free(s->a);
  }
  s->a = NULL;
}

static size_t mark(C *c) { c->marks++; return c->ntrail; }

static void stamps(C *c) {
  if (c->capstamp_s < c->nslots) {
    size_t n = c->capslots;
    c->stamp_s = fsA_xrealloc(c->stamp_s, n * sizeof *c->stamp_s);
    c->pos_s = fsA_xrealloc(c->pos_s, n * sizeof *c->pos_s);
    memset(c->stamp_s + c->capstamp_s, 0, (n - c->capstamp_s) * sizeof *c->stamp_s);
    c->capstamp_s = n;
  }
  if (c->capstamp_o < c->nobjs) {
    size_t n = c->capobjs;
    c->stamp_o = fsA_xrealloc(c->stamp_o, n * sizeof *c->stamp_o);
    c->pos_o = fsA_xrealloc(c->pos_o, n * sizeof *c->pos_o);
    memset(c->stamp_o + c->capstamp_o, 0, (n - c->capstamp_o) * sizeof *c->stamp_o);
    c->capstamp_o = n;
  }
}

/* Records the current value of everything written since m (the writes stay). */
static void record(C *c, size_t m, chgset *out) {
  stamps(c);
  out->epoch = ++c->epoch;
  out->n = 0;
  out->a = NULL;
  out->cap = 0;
  if (c->ntrail > m) out->a = chg_take(c, c->ntrail - m, &out->cap);
  for (size_t i = m; i < c->ntrail; i++) {
    trail_ent *t = &c->trail[i];
    uint32_t *st = t->type == TR_SLOT ? c->stamp_s : c->stamp_o;
    uint32_t *pos = t->type == TR_SLOT ? c->pos_s : c->pos_o;
    if (st[t->idx] == out->epoch) continue;
    st[t->idx] = out->epoch;
    pos[t->idx] = (uint32_t)out->n;
    chg *g = &out->a[out->n++];
    g->type = t->type;
    g->idx = t->idx;
    if (t->type == TR_SLOT) g->val.v = c->slots[t->idx];
    else g->val.o = c->objs[t->idx];
  }
}

/* Records the current value of everything written since m, then undoes the
 * writes: the state is back to what it was at the mark. */
static void capture(C *c, size_t m, chgset *out) {
  record(c, m, out);
  for (size_t i = c->ntrail; i-- > m;) {
    trail_ent *t = &c->trail[i];
    if (t->type == TR_SLOT) c->slots[t->idx] = t->old.v;
    else c->objs[t->idx] = t->old.o;
  }
  c->ntrail = m;
}

static void write_chg(C *c, const chg *g) {
  log_old(c, g->type, g->idx);
  if (g->type == TR_SLOT) c->slots[g->idx] = g->val.v;
  else c->objs[g->idx] = g->val.o;
}

/* After both paths were captured (and undone): writes the join. A dead
 * path (it returned or broke out) contributes nothing. */
static void join_paths(C *c, chgset *A, int deadA, chgset *B, int deadB, uint32_t ra, uint32_t rb) {
  c->marks--;
  if (deadA && deadB) c->dead = 1;
  else if (deadA || deadB) {
    chgset *live = deadA ? B : A;
    for (size_t i = 0; i < live->n; i++) write_chg(c, &live->a[i]);
  } else {
    for (int s = 0; s < 2; s++) {
      chgset *X = s ? B : A, *Y = s ? A : B;
      for (size_t i = 0; i < X->n; i++) {
        chg *g = &X->a[i], r = *g;
        uint32_t *st = g->type == TR_SLOT ? c->stamp_s : c->stamp_o;
        uint32_t *pos = g->type == TR_SLOT ? c->pos_s : c->pos_o;
        int inY = st[g->idx] == Y->epoch;
        if (s && inY) continue; /* joined in the first pass */
        const chg *y = inY ? &Y->a[pos[g->idx]] : NULL;
        /* Only the array of g's type is addressed: the other may not exist yet. */
        if (g->type == TR_SLOT) {
          const cv *va = &g->val.v, *vb = y ? &y->val.v : &c->slots[g->idx];
          if (s) { const cv *tv = va; va = vb; vb = tv; }
          r.val.v = cv_join(c, va, vb, ra);
        } else {
          const cobj *oa = &g->val.o, *ob = y ? &y->val.o : &c->objs[g->idx];
          if (s) { const cobj *to = oa; oa = ob; ob = to; }
          r.val.o = cobj_join(oa, ob, ra, rb);
        }
        write_chg(c, &r);
      }
    }
  }
  chg_give(c, A);
  chg_give(c, B);
}

/* ---- diagnostics -------------------------------------------------------- */

/* Whether (rule, loc) was reported before; records it. */
static int seen_before(C *c, const char *rule, fs_loc loc) {
  char key[96];
  snprintf(key, sizeof key, "%.60s@%u:%u", rule, loc.start, loc.end);
  nkey k = key_str(key);
  if (map_slot(c, &c->seen, &k, 0, NULL)) return 1;
  int fresh = 0;
  k.s = memcpy(fsC_alloc(c, k.len + 1), key, k.len + 1);
  map_slot(c, &c->seen, &k, 1, &fresh);
  return 0;
}

int fsC_first(C *c, const char *key, fs_loc loc) { return !seen_before(c, key, loc); }

/* A rule about what the state is when a call happens (Fabric's, meta,
 * uninitialized), as opposed to what the text says (names, calls, types). */
static int state_rule(const char *rule) {
  return ((rule[0] == 'R' || rule[0] == 'W') && rule[1] >= '0' && rule[1] <= '9') ||
         !strncmp(rule, "meta-", 5) || !strcmp(rule, "uninit");
}

fs_diag *fsC_report(C *c, fs_severity sev, const char *rule, fs_loc loc, const char *fmt, ...) {
  /* no path runs it: not in any state, and no assert of it fails (pickle's
   * __reduce_ex__ = `assert False, "handled out of band"`) */
  if (c->uncalled && (state_rule(rule) || !strcmp(rule, "assert"))) return NULL;
  if (seen_before(c, rule, loc)) return NULL;
  if (c->launch_diag && !strcmp(rule, "R16")) { /* a missing launch() is one mistake: said once */
    fsD_note(&c->d->items[c->launch_diag - 1], c->src, loc, "this call needs `launch()` too");
    return NULL;
  }
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *msg = fsA_xrealloc(NULL, (size_t)(n < 0 ? 0 : n) + 1);
  va_start(ap, fmt);
  vsnprintf(msg, (size_t)(n < 0 ? 0 : n) + 1, fmt, ap);
  va_end(ap);
  fs_diag *g = fsD_add(c->d, sev, rule, c->src, loc, "%s", "");
  free(g->message); /* the message made above, not formatted again through "%s" */
  g->message = msg;
  if (!strcmp(rule, "R16")) c->launch_diag = c->d->n;
  if (g && state_rule(rule) && rank_restricted(c, c->rank_mask)) rank_note(c, g, c->rank_mask);
  if (sev == FS_SEV_ERROR) c->nerrors++;
  return g;
}

/* ---- signatures, cached (the table is scanned linearly) ------------------ */

static const fsSig *sig_lookup(C *c, const char *type, const char *name) {
  char key[160];
  size_t tl = type ? strlen(type) : 0, nl = strlen(name);
  if (tl + nl + 2 > sizeof key) return type ? fsSig_member(type, name) : fsSig_find(name);
  if (tl) memcpy(key, type, tl); /* "Type.name", ".name" for a builtin */
  key[tl] = '.';
  memcpy(key + tl + 1, name, nl + 1);
  nkey k = key_mem(key, tl + 1 + nl);
  uintptr_t *v = map_slot(c, &c->sigs, &k, 0, NULL);
  if (v) return (const fsSig *)*v;
  const fsSig *sig = type ? fsSig_member(type, name) : fsSig_find(name);
  int fresh = 0;
  k.s = memcpy(fsC_alloc(c, k.len + 1), key, k.len + 1);
  *map_slot(c, &c->sigs, &k, 1, &fresh) = (uintptr_t)sig;
  return sig;
}

/* ---- types -------------------------------------------------------------- */

const char *fsC_type_name(C *c, const cv *v) {
  switch (v->k) {
  case CV_CONST: return fsV_type_name(v->p);
  case CV_SEQ: return v->sub & SEQ_TUPLE ? "tuple" : "list";
  case CV_DICT: return "dict";
  case CV_TENSOR: return "Tensor";
  case CV_FUNC: return "function";
  case CV_OBJ:
    switch (c->objs[v->id].kind) {
    case OB_FABRIC: return "Fabric";
    case OB_MODEL: return "Module";
    case OB_OPTIM: return "Optimizer";
    case OB_LOADER: return "DataLoader";
    case OB_DATASET: return "Dataset";
    case OB_PARAMS: return "list";
    case OB_PARAM: return "Tensor";
    default: return NULL;
    }
  case CV_PHI: {
    const cv *a = v->p;
    const char *t = fsC_type_name(c, &a[0]);
    for (uint32_t i = 1; i < v->n && t; i++) {
      const char *u = fsC_type_name(c, &a[i]);
      if (!u || strcmp(t, u)) t = NULL;
    }
    return t;
  }
  default: return NULL;
  }
}

/* The name Python prints for the type in attribute errors. */
static const char *display_type(C *c, const cv *v) {
  const cv *x = v->k == CV_PHI ? &((const cv *)v->p)[0] : v;
  if (x->k == CV_OBJ && c->objs[x->id].kind == OB_MODEL) {
    const cobj *o = &c->objs[x->id];
    return o->wrapped ? c->objs[o->inner].cls : o->cls;
  }
  return fsC_type_name(c, v);
}

static int has_members(const char *t) {
  static const char *const types[] = {"Fabric", "Module", "Optimizer", "Tensor", "DataLoader",
                                      "Dataset", "list", "dict", "str"};
  if (!t) return 0;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) /* the first byte first: a strcmp a row was 1.5% of a big check */
    if (t[0] == types[i][0] && !strcmp(t, types[i])) return 1;
  return 0;
}

static unsigned type_bit(const cv *v) {
  switch (v->k) {
  case CV_CONST:
    switch (((const fs_value *)v->p)->type) {
    case FSV_NONE: return FSSIG_T_NONE;
    case FSV_BOOL: return FSSIG_T_BOOL;
    case FSV_INT: return FSSIG_T_INT;
    case FSV_FLOAT: return FSSIG_T_FLOAT;
    case FSV_STR: return FSSIG_T_STR;
    default: return FSSIG_T_OBJ;
    }
  case CV_SEQ: return v->sub & SEQ_TUPLE ? FSSIG_T_TUPLE : FSSIG_T_LIST;
  case CV_DICT: return FSSIG_T_DICT;
  case CV_FUNC: return FSSIG_T_FUNC;
  default: return 0;
  }
}

static void types_text(unsigned mask, char *buf, size_t len) {
  static const char *const names[] = {"None", "bool", "int", "float", "str", "list", "tuple",
                                      "dict", "function", "object"};
  size_t k = 0;
  buf[0] = 0;
  int count = 0;
  for (int i = 0; i < 10; i++) count += (mask >> i) & 1;
  for (int i = 0, j = 0; i < 10; i++) {
    if (!((mask >> i) & 1)) continue;
    j++;
    k += (size_t)snprintf(buf + k, k < len ? len - k : 0, "%s%s",
                          j == 1 ? "" : j == count ? " or " : ", ", names[i]);
  }
}

/* "Did you mean": help naming the candidate closest to word, and the fix-it
 * that writes it over `at`, the misspelt text itself (so the fix is valid
 * code where it is applied). */
static void suggest(fs_diag *g, const char *word, const char *const *cands, size_t n, fs_loc at) {
  const char *near = g ? fsD_closest(word, cands, n) : NULL;
  if (!near) return;
  fsD_help(g, "did you mean `%s`?", near);
  fsD_edit(g, at, near);
}

/* The members of type t (its own and inherited ones, as fsSig_member finds them). */
static size_t members_of(C *c, const char *t, const char ***out) {
  size_t n, k = 0;
  const fsSig *all = fsSig_all(&n);
  const char **names = fsC_alloc(c, (n + 1) * sizeof *names);
  for (size_t i = 0; i < n; i++) {
    const char *dot = strchr(all[i].name, '.');
    if (!dot || !fsSig_member(t, dot + 1)) continue;
    size_t j = 0;
    while (j < k && strcmp(names[j], dot + 1)) j++;
    if (j == k) names[k++] = dot + 1;
  }
  *out = names;
  return k;
}

/* Binds a call's arguments to sig: arity, keywords, literal types. An
 * unknown keyword is reported at itself, with the nearest parameter. */
int fsC_bind(C *c, const fsSig *sig, const fs_node *call, int *pos_slot, int *kw_slot) {
  size_t npos = 0, nkw = 0;
  const char *kw[64];
  for (uint32_t i = 1; i < call->nkids; i++) {
    const fs_node *a = call->kids[i];
    if (a->kind == FS_N_KWARG) { if (nkw < 64) kw[nkw++] = a->str; }
    else npos++;
  }
  char *err = NULL;
  if (nkw >= 64 || fsSig_bind(sig, npos, kw, nkw, pos_slot, kw_slot, &err)) {
    const fs_node *bad = NULL;
    const char *q = err ? strstr(err, "unexpected keyword argument '") : NULL;
    for (uint32_t i = 1; q && i < call->nkids && !bad; i++)
      if (call->kids[i]->kind == FS_N_KWARG && !strncmp(q + 29, call->kids[i]->str, strlen(call->kids[i]->str)) &&
          q[29 + strlen(call->kids[i]->str)] == '\'')
        bad = call->kids[i];
    fs_diag *g = fsC_report(c, FS_SEV_ERROR, "call", bad ? bad->name_loc : call->loc, "%s", err ? err : "too many arguments");
    if (bad) {
      const char **names = fsC_alloc(c, (sig->nparams + 1) * sizeof *names);
      for (size_t i = 0; i < sig->nparams; i++)
        names[i] = sig->params[i].flags & (FSSIG_VARARGS | FSSIG_VARKW | FSSIG_POSONLY) ? NULL : sig->params[i].name;
      suggest(g, bad->str, names, sig->nparams, bad->name_loc);
    }
    free(err);
    return -1;
  }
  return 0;
}

/* Literal arguments against the parameter types. */
static void check_types(C *c, const fsSig *sig, const fs_node *call, const cv *pos, size_t npos,
                        const cv *kwv, size_t nkw, const int *pos_slot, const int *kw_slot) {
  const char *base = strchr(sig->name, '.') ? strchr(sig->name, '.') + 1 : sig->name;
  for (size_t i = 0; i < npos + nkw; i++) {
    const cv *v = i < npos ? &pos[i] : &kwv[i - npos];
    int slot = i < npos ? pos_slot[i] : kw_slot[i - npos];
    const fsSig_param *p = &sig->params[slot];
    if (p->flags & (FSSIG_VARARGS | FSSIG_VARKW)) continue;
    unsigned bit = type_bit(v), mask = p->types;
    if (!bit || mask == FSSIG_T_ANY) continue;
    if (bit == FSSIG_T_BOOL && (mask & FSSIG_T_INT)) continue;   /* bool is an int */
    if (bit == FSSIG_T_INT && (mask & FSSIG_T_FLOAT)) continue;  /* an int is accepted for a float */
    if (bit & mask) continue;
    char want[160];
    types_text(mask, want, sizeof want);
    const fs_node *arg = NULL;
    for (uint32_t k = 1, np = 0, nk = 0; k < call->nkids; k++) {
      int kwa = call->kids[k]->kind == FS_N_KWARG;
      if ((kwa && i >= npos && nk++ == i - npos) || (!kwa && i < npos && np++ == i)) {
        arg = kwa ? call->kids[k]->kids[0] : call->kids[k];
        break;
      }
    }
    fsC_report(c, FS_SEV_ERROR, "type", arg ? arg->loc : call->loc,
               "%s() argument '%s' must be %s, not %s", base, p->name, want, fsC_type_name(c, v));
  }
}

/* ---- expressions -------------------------------------------------------- */

static inline cv ev(C *c, const fs_node *n);
static cv ev_comp(C *c, const fs_node *n);
static cv unary(C *c, const fs_node *n, cv a);
static cv binary(C *c, const fs_node *n, cv a, cv b);
static cv compare_chain(C *c, const fs_node *n, const cv *vals);
static void assign(C *c, const fs_node *t, cv v);
static void block(C *c, const fs_node *b);
static void st(C *c, const fs_node *s);

/* 1 true, 0 false, -1 not known */
static int truth(const cv *v) {
  switch (v->k) {
  case CV_CONST: return fsV_truthy(v->p);
  case CV_SEQ: case CV_DICT: return fsC_unsized(v) ? -1 : v->n > 0;
  case CV_OBJ: case CV_FUNC: case CV_CLASS: return 1;
  default: return -1;
  }
}

/* Whether `a op b` of two constants is worth computing: a string grown by +
 * or * is paid from the budget, and unknown when it would not fit or is
 * longer than MAX_KNOWN_STR (names, keys and messages are short; a longer
 * string's text never decides a rule, and "x" * 10**9 took 1 GB and 4 s). */
#define MAX_KNOWN_STR ((size_t)1 << 20)
static int affordable(C *c, fs_op op, const fs_value *a, const fs_value *b) {
  const fs_value *s = a->type == FSV_STR ? a : b->type == FSV_STR ? b : NULL, *k = s == a ? b : a;
  if (!s || (op != FS_OP_ADD && op != FS_OP_MUL)) return 1;
  size_t bytes = s->u.str.len;
  if (op == FS_OP_ADD) bytes += k->type == FSV_STR ? k->u.str.len : 0;
  else if (k->type == FSV_INT && k->u.i > 0) {
    if ((uint64_t)k->u.i > c->bytes_left / (bytes ? bytes : 1)) return 0;
    bytes *= (size_t)k->u.i;
  }
  if (bytes > MAX_KNOWN_STR || bytes >= c->bytes_left) return 0;
  spend(c, bytes);
  return 1;
}

/* Which ranks of the current path v is true on (*t: may be, *f: may be
 * false); a value that is not rank-dependent is the same on all of them. */
static void truth_ranks(C *c, const cv *v, uint32_t *t, uint32_t *f) {
  *t = *f = 0;
  uint32_t path = c->rank_n ? c->rank_mask & all_ranks(c) : 1;
  for (uint32_t i = 0; i < (c->rank_n ? c->rank_n : 1); i++) {
    if (!((path >> i) & 1)) continue;
    cv x = rank_alt(v, i);
    int ti = truth(&x);
    if (ti != 0) *t |= 1u << i;
    if (ti != 1) *f |= 1u << i;
  }
}

/* truth() on the ranks of the current path: -1 when not known or they differ. */
static int truth_on(C *c, const cv *v) {
  if (!ranked(v)) return truth(v);
  uint32_t t, f;
  truth_ranks(c, v, &t, &f);
  return !t ? 0 : !f ? 1 : -1;
}

/* int op int and the float arithmetic that cannot fail, computed in place:
 * what fsV_binop would give, without its malloc'd value (each literal
 * expression of a script's defs and loops made one). 0: not one of those. */
static int number_op(C *c, fs_op op, const fs_value *a, const fs_value *b, cv *out) {
  if (a->type == FSV_INT && b->type == FSV_INT) {
    int64_t x = a->u.i, y = b->u.i, r;
    switch (op) {
    case FS_OP_ADD: if (__builtin_add_overflow(x, y, &r)) return 0; break;
    case FS_OP_SUB: if (__builtin_sub_overflow(x, y, &r)) return 0; break;
    case FS_OP_MUL: if (__builtin_mul_overflow(x, y, &r)) return 0; break;
    case FS_OP_FDIV: case FS_OP_MOD: {
      if (y == 0 || (x == INT64_MIN && y == -1)) return 0;
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; } /* floor toward -inf, as Python */
      r = op == FS_OP_FDIV ? q : m;
      break;
    }
    case FS_OP_EQ: *out = fsC_const(c, fsV_bool(x == y)); return 1;
    case FS_OP_NE: *out = fsC_const(c, fsV_bool(x != y)); return 1;
    case FS_OP_LT: *out = fsC_const(c, fsV_bool(x < y)); return 1;
    case FS_OP_LE: *out = fsC_const(c, fsV_bool(x <= y)); return 1;
    case FS_OP_GT: *out = fsC_const(c, fsV_bool(x > y)); return 1;
    case FS_OP_GE: *out = fsC_const(c, fsV_bool(x >= y)); return 1;
    default: return 0;
    }
    *out = fsC_int(c, r);
    return 1;
  }
  int af = a->type == FSV_FLOAT, bf = b->type == FSV_FLOAT;
  if (!(af || bf) || !(af || a->type == FSV_INT) || !(bf || b->type == FSV_INT)) return 0;
  double x = af ? a->u.f : (double)a->u.i, y = bf ? b->u.f : (double)b->u.i;
  switch (op) {
  case FS_OP_ADD: *out = const_float(c, x + y); return 1;
  case FS_OP_SUB: *out = const_float(c, x - y); return 1;
  case FS_OP_MUL: *out = const_float(c, x * y); return 1;
  case FS_OP_DIV: if (y == 0.0) return 0; *out = const_float(c, x / y); return 1;
  default: return 0;
  }
}

static cv binop(C *c, const fs_node *n, fs_op op, cv a, cv b) {
  const fs_value *fa = fsC_cval(&a);
  if (c->python && op == FS_OP_MOD && fa && fa->type == FSV_STR) return fsC_unknown(); /* printf-style */
  if (a.k == CV_CONST && b.k == CV_CONST) {
    if (!affordable(c, op, a.p, b.p)) return fsC_unknown();
    cv quick;
    if (number_op(c, op, a.p, b.p, &quick)) return quick;
    fsV_clearerr();
    fs_value *r = fsV_binop(NULL, op, (fs_value *)a.p, (fs_value *)b.p);
    if (!r && fsV_error()[0])
      fsC_report(c, FS_SEV_ERROR, "type", n->loc, "%s", fsV_error());
    return fsC_const(c, r);
  }
  if (a.k == CV_TENSOR || b.k == CV_TENSOR) {
    cv t = {.k = CV_TENSOR};
    t.id = a.k == CV_TENSOR && a.id ? a.id : b.k == CV_TENSOR ? b.id : 0;
    return t;
  }
  int aseq = a.k == CV_SEQ || fsC_is(&a, OB_PARAMS, c), bseq = b.k == CV_SEQ || fsC_is(&b, OB_PARAMS, c);
  if (op == FS_OP_ADD && aseq && bseq) {
    /* list + list: keep the parameter references for an optimizer */
    cv two[2] = {a, b};
    size_t total = (a.k == CV_SEQ ? a.n : 1) + (b.k == CV_SEQ ? b.n : 1), k = 0;
    cv *items = fsC_alloc(c, total * sizeof *items);
    for (int s = 0; s < 2; s++) {
      if (two[s].k == CV_SEQ)
        for (uint32_t i = 0; i < two[s].n; i++) items[k++] = ((const cv *)two[s].p)[i];
      else items[k++] = two[s];
    }
    int tuple = a.k == CV_SEQ && b.k == CV_SEQ && (a.sub & b.sub & SEQ_TUPLE);
    /* a parameters() collection is many items: the sum's length is not known */
    if (fsC_unsized(&a) || fsC_unsized(&b) || a.k != CV_SEQ || b.k != CV_SEQ)
      return fsC_unsized_seq(c, items, k, tuple);
    return seq(c, items, k, tuple);
  }
  /* raisesD: a sized list of objects times a known count, up to 64 items
   * (`[torch.device("cpu")] * 2`, a strategy's parallel_devices): the items
   * repeated; a list of constants is a constant (above) */
  const fs_value *count = fsC_cval(&b);
  if (op == FS_OP_MUL && a.k == CV_SEQ && !fsC_unsized(&a) && count && count->type == FSV_INT) {
    int64_t times = count->u.i < 0 ? 0 : count->u.i;
    if (times > 64 || (int64_t)a.n * times > 64) return fsC_unknown();
    size_t total = (size_t)a.n * (size_t)times;
    cv *items = fsC_alloc(c, (total ? total : 1) * sizeof *items);
    for (size_t i = 0; i < total; i++) items[i] = ((const cv *)a.p)[i % a.n];
    return seq(c, items, total, (a.sub & SEQ_TUPLE) != 0);
  }
  return fsC_unknown();
}

static cv ns_value(C *c, const char *dotted);

/* What a name no scope binds is, the same wherever it is read: a builtin's
 * row, the names below, a Python builtin, or none of them (FREE_NONE). */
enum { FREE_NONE = 1, FREE_MODULE, FREE_MAIN, FREE_PYTHON }; /* below any row's address */

/* free_name's answer for name k, cached per check: a
 * script's every `range`, `super` or `max` cost a second hash, a key built
 * for the signature cache and a search of Python's builtins. */
static uintptr_t free_name(C *c, const nkey *k) {
  uintptr_t *known = map_slot(c, &c->free_names, k, 0, NULL);
  const char *name = k->s;
  if (known) return *known;
  const fsSig *sig = sig_lookup(c, NULL, name);
  uintptr_t what = sig ? (uintptr_t)sig : !strcmp(name, "Module") ? FREE_MODULE
                 : !strcmp(name, "__name__") ? FREE_MAIN : fsSig_python_builtin(name) ? FREE_PYTHON : FREE_NONE;
  int fresh = 0;
  *map_slot(c, &c->free_names, k, 1, &fresh) = what; /* the name is the tree's: it outlives the map */
  return what;
}

static cv ev_name(C *c, const fs_node *n) {
  nkey key = key_name(n);
  uintptr_t *var = var_slot(c, &key);
  if (var && c->slots[*var].k != CV_UNDEF) return c->slots[*var];
  uintptr_t what = free_name(c, &key);
  if (what > FREE_PYTHON) return (cv){.k = CV_CLASS, .sub = CLS_SIG, .p = (const fsSig *)what};
  /* the class a FabricScript script's modules subclass, as the run binds it */
  if (what == FREE_MODULE) return ns_value(c, "torch.nn.Module");
  if (what == FREE_MAIN) { /* a checked script is the one Python runs */
    fs_value *main_str = arena_value(c, FSV_STR);
    main_str->u.str.s = (char *)"__main__";
    main_str->u.str.len = 8;
    return (cv){.k = CV_CONST, .p = main_str};
  }
  if (what == FREE_PYTHON || c->star_import) return fsC_unknown();
  /* a closure called away from its enclosing def: its free names are not known here */
  if (c->nframes && c->frames[c->nframes - 1]->closure) return fsC_unknown();
  /* bound in this scope on a path the checker does not follow to here (an
   * assignment before a `break`): Python's loops and exceptions decide */
  if (c->python && ((c->nframes && map_slot(c, &c->frames[c->nframes - 1]->locals, &key, 0, NULL)) ||
                    map_slot(c, &c->globals, &key, 0, NULL)))
    return fsC_unknown();
  fs_diag *g = fsC_report(c, FS_SEV_ERROR, "name", n->loc, "name '%s' is not defined", n->str);
  if (g) { /* the nearest variable bound here, or builtin */
    size_t nsig, k = 0;
    const fsSig *all = fsSig_all(&nsig);
    name_map *scopes[2] = {c->nframes ? &c->frames[c->nframes - 1]->locals : NULL, &c->globals};
    size_t cap = nsig + c->globals.cap + (scopes[0] ? scopes[0]->cap : 0) + 1;
    const char **names = fsC_alloc(c, cap * sizeof *names);
    for (int s = 0; s < 2; s++)
      for (size_t i = 0; scopes[s] && i < scopes[s]->cap; i++)
        if (scopes[s]->e[i].key && c->slots[scopes[s]->e[i].val].k != CV_UNDEF) names[k++] = scopes[s]->e[i].key;
    for (size_t i = 0; i < nsig; i++) if (!strchr(all[i].name, '.')) names[k++] = all[i].name;
    suggest(g, n->str, names, k, n->loc);
  }
  return fsC_unknown();
}

/* ---- Python's imports and classes ----------------------------------------- */

/* What a dotted torch/lightning name is to the checker: a builtin's row, a
 * namespace not modelled (CLS_NS), or, outside those packages, unknown. */
static cv ns_value(C *c, const char *dotted) {
  const char *row = NULL;
  fsSig_ns ns = fsSig_resolve(dotted, &row);
  switch (ns) {
  case FSSIG_NS_ROW: case FSSIG_NS_LOOSE: {
    const fsSig *sig = sig_lookup(c, NULL, row);
    /* id 1: a Python script calls it with the real API's arguments, not bound here */
    if (sig) return (cv){.k = CV_CLASS, .sub = CLS_SIG, .p = sig, .id = ns == FSSIG_NS_LOOSE && c->python};
    return (cv){.k = CV_CLASS, .sub = CLS_NS, .p = dotted};
  }
  case FSSIG_NS_MODULE:
    if (!c->python && sig_lookup(c, NULL, row)) /* nn.Sequential: the run's own class */
      return (cv){.k = CV_CLASS, .sub = CLS_SIG, .p = sig_lookup(c, NULL, row)};
    if (c->python) { /* nn.Sequential(...): a module whose contents are unknown */
      pyclass *k = fsC_alloc(c, sizeof *k);
      memset(k, 0, sizeof *k);
      k->name = row;
      k->module = 1;
      return (cv){.k = CV_CLASS, .sub = CLS_PY, .p = k};
    }
    return (cv){.k = CV_CLASS, .sub = CLS_NS, .p = dotted};
  case FSSIG_NS_MEMBER: return (cv){.k = CV_CLASS, .sub = CLS_NS, .p = dotted};
  default: return fsC_unknown();
  }
}

/* ns.attr for a namespace value. Each dotted name is resolved once per
 * check (c->ns_vals): `nn.Linear` in every block of a long script would
 * otherwise cost a new string and a search of pynames.c's tables each time.
 * A namespace's text and a member's name find it again without the dotted
 * string (c->ns_memo): building and hashing it at each use was 3% of a big
 * check; the dotted name stays the key, so one name is one value however
 * its namespace was reached. */
typedef struct ns_memo { const char *ns, *attr; uint32_t hash, len; const cv *v; } ns_memo;

static cv ns_attr(C *c, const cv *ns, const char *attr) {
  size_t b = strlen(attr);
  uint64_t p = (uint64_t)(uintptr_t)ns->p * 0x9E3779B97F4A7C15u;
  uint32_t h = hash_mem(attr, b) ^ (uint32_t)(p >> 32);
  size_t mask = c->capns_memo - 1, j = h & mask;
  for (const ns_memo *m; c->capns_memo && (m = &c->ns_memo[j])->v; j = (j + 1) & mask)
    if (m->hash == h && m->ns == ns->p && m->len == b && same_bytes(m->attr, attr, (uint32_t)b)) return *m->v;
  size_t a = strlen(ns->p);
  char key[160], *s = a + b + 2 <= sizeof key ? key : fsC_alloc(c, a + b + 2);
  memcpy(s, ns->p, a);
  s[a] = '.';
  memcpy(s + a + 1, attr, b + 1);
  nkey k = key_mem(s, a + b + 1);
  uintptr_t *hit = map_slot(c, &c->ns_vals, &k, 0, NULL);
  const cv *v = hit ? (const cv *)*hit : NULL;
  if (!v) {
    if (s == key) k.s = s = strcpy(fsC_alloc(c, a + b + 2), key);
    cv *fresh_v = fsC_alloc(c, sizeof *fresh_v);
    *fresh_v = ns_value(c, s);
    int fresh = 0;
    *map_slot(c, &c->ns_vals, &k, 1, &fresh) = (uintptr_t)fresh_v;
    v = fresh_v;
  }
  if ((c->nns_memo + 1) * 2 > c->capns_memo) { /* rehash into twice the room */
    size_t cap = c->capns_memo ? 2 * c->capns_memo : 16;
    ns_memo *t = table_alloc(c, cap * sizeof *t);
    for (size_t i = 0; i < c->capns_memo; i++) {
      if (!c->ns_memo[i].v) continue;
      size_t at = c->ns_memo[i].hash & (cap - 1);
      while (t[at].v) at = (at + 1) & (cap - 1);
      t[at] = c->ns_memo[i];
    }
    table_free(c->ns_memo, c->capns_memo * sizeof *t);
    c->ns_memo = t;
    c->capns_memo = cap;
    for (j = h & (cap - 1); t[j].v; j = (j + 1) & (cap - 1)) {}
  }
  /* attr is the tree's text and ns->p the arena's or a static string: both outlive the table */
  c->ns_memo[j] = (ns_memo){ns->p, attr, h, (uint32_t)b, v};
  c->nns_memo++;
  return *v;
}

/* The Python class of a model value (its raw object's), or NULL: such a
 * model has the attributes and methods its class gives it, beyond Module's. */
static const pyclass *pyclass_of(C *c, const cv *v) {
  const cv *x = v->k == CV_PHI ? &((const cv *)v->p)[0] : v;
  uint32_t raw;
  if (x->k == CV_OBJ && c->objs[x->id].kind == OB_INSTANCE) return c->objs[x->id].pycls;
  return fsC_model_obj(c, x, &raw) ? c->objs[raw].pycls : NULL;
}

/* The object whose attributes `v.name = ...` sets: an instance of a Python
 * class, or the raw model a Python nn.Module (wrapped or not) is; -1 if none. */
static int64_t attr_owner(C *c, const cv *v) {
  uint32_t raw;
  if (v->k != CV_OBJ) return -1;
  if (c->objs[v->id].kind == OB_INSTANCE) return v->id;
  return fsC_model_obj(c, v, &raw) && c->objs[raw].pycls ? (int64_t)raw : -1;
}

/* An object's attributes are globals under a key no name can spell
 * ("\x01<id>.<name>"), so the undo trail and the joins at branches cover
 * them as they cover variables. */
static uintptr_t *attr_slot(C *c, uint32_t id, const char *name, int create) {
  char key[160];
  if (snprintf(key, sizeof key, "\x01%u.%s", id, name) >= (int)sizeof key) return NULL;
  int fresh = 0;
  nkey k = key_str(key);
  if (create) k.s = memcpy(fsC_alloc(c, k.len + 1), key, k.len + 1);
  uintptr_t *s = map_slot(c, &c->globals, &k, create, &fresh);
  if (s && fresh) {
    GROW(c, c->slots, c->nslots, c->capslots);
    c->slots[c->nslots] = (cv){.k = CV_UNDEF};
    *s = c->nslots++;
  }
  return s;
}

static cv get_attr(C *c, const cv *obj, const char *name) {
  int64_t id = attr_owner(c, obj);
  uintptr_t *s = id < 0 ? NULL : attr_slot(c, (uint32_t)id, name, 0);
  return s && c->slots[*s].k != CV_UNDEF ? c->slots[*s] : fsC_unknown();
}

cv fsC_attr(C *c, const cv *obj, const char *name) { return get_attr(c, obj, name); }

/* Only objects are remembered (a fabric, a model, an optimizer): numbers,
 * strings and containers an attribute holds may be changed by code the
 * checker does not see (a callback run by fabric.call, a library), so they
 * are unknown when read. */
static void set_attr(C *c, const cv *obj, const char *name, cv v) {
  size_t n = v.k == CV_PHI ? v.n : 1;
  const cv *alts = v.k == CV_PHI ? v.p : &v;
  for (size_t i = 0; i < n; i++)
    if (alts[i].k != CV_OBJ && alts[i].k != CV_TENSOR && alts[i].k != CV_FUNC && alts[i].k != CV_CLASS) {
      v = fsC_unknown();
      break;
    }
  int64_t id = attr_owner(c, obj);
  uintptr_t *s = id < 0 ? NULL : attr_slot(c, (uint32_t)id, name, 1);
  if (!s) return;
  log_old(c, TR_SLOT, (uint32_t)*s);
  c->slots[*s] = v;
}

/* The def index's slot for def: 1 + its index in c->defs, 0 when it has no
 * record. Keyed by the node's address, so that a call finds its def's record
 * in constant time (a scan of the records made a script of n defs, each
 * called, cost n^2). */
static uint32_t *def_slot(C *c, const fs_node *def) {
  if ((c->ndefs + 1) * 2 > c->capdefidx) {
    size_t cap = c->capdefidx ? 2 * c->capdefidx : 64;
    uint32_t *idx = fsA_xrealloc(NULL, cap * sizeof *idx);
    memset(idx, 0, cap * sizeof *idx);
    for (size_t i = 0; i < c->ndefs; i++) {
      size_t j = ((uintptr_t)c->defs[i].def >> 4) & (cap - 1);
      while (idx[j]) j = (j + 1) & (cap - 1);
      idx[j] = (uint32_t)i + 1;
    }
    free(c->defidx);
    c->defidx = idx;
    c->capdefidx = cap;
  }
  size_t j = ((uintptr_t)def >> 4) & (c->capdefidx - 1);
  while (c->defidx[j] && c->defs[c->defidx[j] - 1].def != def) j = (j + 1) & (c->capdefidx - 1);
  return &c->defidx[j];
}

/* Records a def statement once (a nested def's statement runs at each call
 * of its enclosing def): the defs no path calls are analysed at the end. */
static void def_record(C *c, const fs_node *def, int nested) {
  uint32_t *at = def_slot(c, def);
  if (*at) return;
  GROW(c, c->defs, c->ndefs, c->capdefs);
  c->defs[c->ndefs] = (struct defrec){def, 0, nested};
  *at = (uint32_t)++c->ndefs;
}

/* The def of method name in class k or its Python bases, or NULL. */
static const fs_node *py_method(const pyclass *k, const char *name) {
  const fs_node *body = k->node ? k->node->kids[1] : NULL;
  for (uint32_t i = 0; body && i < body->nkids; i++)
    if (body->kids[i]->kind == FS_N_DEF && !strcmp(body->kids[i]->str, name)) return body->kids[i];
  for (uint8_t i = 0; i < k->nbases; i++) {
    const fs_node *d = py_method(k->bases[i], name);
    if (d) return d;
  }
  return NULL;
}

const fs_node *fsC_py_method(const pyclass *k, const char *name) { return py_method(k, name); }

/* Whether a base class value makes a class an nn.Module. */
static int module_base(const cv *b) {
  if (b->k != CV_CLASS) return 0;
  switch (b->sub) {
  case CLS_SIG: return ((const fsSig *)b->p)->kind == FSSIG_LAYER;
  case CLS_MODEL: return 1;
  case CLS_PY: return ((const pyclass *)b->p)->module;
  case CLS_NS: {
    const char *d = b->p, *last = strrchr(d, '.');
    return last && (!strcmp(last, ".LightningModule") ||
                    (!strcmp(last, ".Module") && !strncmp(d, "torch.", 6)));
  }
  default: return 0;
  }
}

/* `class K(bases): body`: the class value; its plain methods are analysed
 * where called (and, like every def, once with unknown arguments if never). */
static void st_class(C *c, const fs_node *s) {
  pyclass *k = fsC_alloc(c, sizeof *k);
  memset(k, 0, sizeof *k);
  k->node = s;
  k->name = s->str;
  const fs_node *bases = s->kids[0];
  for (uint32_t i = 1; bases && i < bases->nkids; i++) {
    const fs_node *b = bases->kids[i];
    cv v = ev(c, b->kind == FS_N_KWARG || b->kind == FS_N_STARRED ? b->kids[0] : b);
    if (b->kind != FS_N_NAME && b->kind != FS_N_ATTR) continue;
    if (module_base(&v)) k->module = 1;
    if (v.k == CV_CLASS && v.sub == CLS_PY && k->nbases < 4) k->bases[k->nbases++] = v.p;
  }
  if (fsC_kid(s, 2))
    for (uint32_t i = 0; i < s->kids[2]->nkids; i++) ev(c, s->kids[2]->kids[i]);
  /* The body runs in a scope of its own (class attributes are not globals);
   * its methods see the enclosing def's names, not the class's. */
  const fs_node *body = s->kids[1];
  int nested = c->nframes > 0;
  if (c->nframes < 32 && body) {
    frame f;
    memset(&f, 0, sizeof f);
    f.fn = s;
    f.closure = nested;
    c->frames[c->nframes++] = &f;
    int dead0 = c->dead;
    for (uint32_t i = 0; i < body->nkids && !c->dead; i++) {
      const fs_node *m = body->kids[i];
      if (i + 1 < body->nkids) __builtin_prefetch(body->kids[i + 1]);
      if (m->kind != FS_N_DEF) { st(c, m); continue; }
      if (!fsA_def_plain(m)) { fsC_setvar(c, m->str, fsC_unknown()); continue; } /* decorated ... */
      def_record(c, m, nested);
      fsC_setvar(c, m->str, (cv){.k = CV_FUNC, .p = m});
    }
    c->dead = dead0;
    c->nframes--;
    map_free(c, &f.locals);
  }
  fsC_setvar(c, s->str, (cv){.k = CV_CLASS, .sub = CLS_PY, .p = k});
}

/* K(args): an nn.Module class makes a model object (under the active
 * contexts, so meta under init_module(empty_init=True) with FSDP), another
 * class an instance; __init__ is analysed with self bound to it, and so is
 * each method called on it. Its attributes are unknown. */
static cv new_instance(C *c, const pyclass *k, const fs_node *call, cv *pos, size_t npos,
                       const char *const *kw, const cv *kwv, size_t nkw) {
  cv self = k->module ? fsC_new_model(c, k->name, call->loc)
                      : fsC_obj(fsC_new_obj(c, OB_INSTANCE, call->loc));
  fsC_o(c, self.id)->pycls = k;
  const fs_node *init = py_method(k, "__init__");
  if (init && fsA_def_plain(init)) {
    pos[-1] = self; /* pos is an fsC_argbuf's: the slot before it is free */
    fsC_call_def(c, init, call, pos - 1, npos + 1, kw, kwv, nkw);
  }
  /* the layer sizes its __init__ gave it, followed through forward (shape.c) */
  const fs_node *forward = k->module ? py_method(k, "forward") : NULL;
  if (forward) fsC_forward_shapes(c, &self, forward);
  if (k->module && !k->node && !strcmp(k->name, "Sequential")) fsC_sequential(c, self.id, call, pos, npos);
  return self;
}

/* A member torch or Lightning has and signatures.h does not model: in a
 * Python script it exists, and its value is unknown. */
static int real_member(C *c, const char *type, const char *member) {
  return c->python && fsSig_real_member(type, member);
}

/* `-D name=value` read as a Python literal: an int, a float, True, False,
 * None, else the text as a str. */
static cv literal_define(C *c, const char *text) {
  char *end;
  long long i = strtoll(text, &end, 10);
  if (*text && !*end) return fsC_int(c, i);
  double f = strtod(text, &end);
  if (*text && !*end) return fsC_const(c, fsV_float(f));
  if (!strcmp(text, "True") || !strcmp(text, "False")) return fsC_const(c, fsV_bool(text[0] == 'T'));
  if (!strcmp(text, "None")) return fsC_const(c, fsV_none());
  return fsC_const(c, fsV_str(text, strlen(text)));
}

/* In a Python script, `args.devices` of a value the checker does not know
 * (an argparse Namespace, a jsonargparse config), and the parameter devices
 * of a def no path calls (CLI(setup) calls it), is -D devices=V's V. */
static int define_attr(C *c, const char *name, cv *out) {
  size_t len = strlen(name);
  for (size_t i = 0; i < c->o->ndefines; i++) {
    const char *d = c->o->defines[i];
    if (strncmp(d, name, len) || d[len] != '=') continue;
    c->define_used[i] = 1;
    *out = literal_define(c, d + len + 1);
    return 1;
  }
  return 0;
}

static cv ev_attr(C *c, const fs_node *n) {
  cv r = ev(c, n->kids[0]);
  if (r.k == CV_CLASS && r.sub == CLS_NS) return ns_attr(c, &r, n->str);
  cv given;
  if (c->python && r.k == CV_UNKNOWN && define_attr(c, n->str, &given)) return given;
  const char *t = fsC_type_name(c, &r);
  if (!t && pyclass_of(c, &r)) return get_attr(c, &r, n->str);
  if (r.k == CV_OBJ && c->objs[r.id].kind == OB_STRATEGY) { /* Fabric's other members: not modelled */
    fsC_strategy_attr(c, r.id, n);
    return fsC_unknown();
  }
  if (!has_members(t)) return fsC_unknown();
  const fsSig *sig = sig_lookup(c, t, n->str);
  if (!sig && pyclass_of(c, &r)) return get_attr(c, &r, n->str); /* set by its class's code */
  if (!sig && real_member(c, t, n->str)) return fsC_unknown();
  if (!sig && !strcmp(display_type(c, &r), "ModuleDict")) return fsC_unknown(); /* md.wte: a key (not tracked) */
  if (!sig) {
    fs_diag *g = fsC_report(c, FS_SEV_ERROR, "attr", n->name_loc, "'%s' object has no attribute '%s'",
                            display_type(c, &r), n->str);
    const char **names;
    size_t k = g ? members_of(c, t, &names) : 0;
    if (k) suggest(g, n->str, names, k, n->name_loc);
    return fsC_unknown();
  }
  if (sig->kind == FSSIG_ATTR && r.k == CV_OBJ && c->objs[r.id].kind == OB_FABRIC &&
      !strcmp(n->str, "device"))
    fsC_fabric_device(c, r.id, n->loc);
  if (sig->kind == FSSIG_ATTR && r.k == CV_OBJ && c->objs[r.id].kind == OB_FABRIC && !strcmp(n->str, "strategy"))
    return fsC_fabric_strategy(c, r.id);
  if (sig->kind == FSSIG_ATTR && r.k == CV_OBJ && c->objs[r.id].kind == OB_FABRIC &&
      !strcmp(n->str, "world_size")) {
    const fsF_config *cfg = fsC_cfg(c, r.id);
    if (cfg) return fsC_int(c, cfg->world_size);
  }
  cv rank;
  if (sig->kind == FSSIG_ATTR && r.k == CV_OBJ && c->objs[r.id].kind == OB_FABRIC && rank_value(c, r.id, n->str, &rank))
    return rank;
  if (sig->kind == FSSIG_ATTR && !strcmp(sig->returns, "Tensor")) return (cv){.k = CV_TENSOR};
  return fsC_unknown();
}

static cv ev_index(C *c, const fs_node *n) {
  cv o = ev(c, n->kids[0]);
  const fs_node *ix = n->kids[1];
  if (ix->kind == FS_N_SLICE) {
    for (uint32_t i = 0; i < 3; i++) if (fsC_kid(ix, i)) ev(c, ix->kids[i]);
    return o.k == CV_TENSOR ? o : fsC_unknown();
  }
  cv k = ev(c, ix);
  if (o.k == CV_TENSOR) return o;
  if (fsC_unsized(&o)) /* any of its elements (a dict: its values) */
    return o.k == CV_SEQ ? fsC_elements(c, &o) : join_all(c, (const cv *)o.p + o.n, o.n);
  if (o.k == CV_SEQ && k.k == CV_CONST && ((const fs_value *)k.p)->type == FSV_INT) {
    int64_t i = ((const fs_value *)k.p)->u.i;
    if (i < 0) i += o.n;
    if (i < 0 || i >= (int64_t)o.n) {
      fsC_report(c, FS_SEV_ERROR, "index", n->loc, "%s index out of range", o.sub ? "tuple" : "list");
      return fsC_unknown();
    }
    return ((const cv *)o.p)[i];
  }
  if (o.k == CV_DICT && k.k == CV_CONST) {
    const cv *kv = o.p;
    for (uint32_t i = 0; i < o.n; i++)
      if (kv[i].k == CV_CONST && fsV_equal(kv[i].p, k.p)) return kv[o.n + i];
    return fsC_unknown();
  }
  if (o.k == CV_CONST && k.k == CV_CONST) {
    fsV_clearerr();
    fs_value *r = fsV_index(NULL, (fs_value *)o.p, (fs_value *)k.p);
    if (!r && fsV_error()[0]) fsC_report(c, FS_SEV_ERROR, "index", n->loc, "%s", fsV_error());
    return fsC_const(c, r);
  }
  return fsC_unknown();
}

/* xs.extend(it), xs.insert(i, v), xs.pop() ... on a named list the checker
 * holds (Python's list methods beyond append): its length is no longer
 * known, and what extend or insert adds is among its elements. */
static void list_mutated(C *c, const fs_node *callee, const cv *recv, const char *m, const cv *pos, size_t npos) {
  static const char *const mutators[] = {"extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
  size_t i = 0;
  while (i < sizeof mutators / sizeof *mutators && strcmp(m, mutators[i])) i++;
  if (i == sizeof mutators / sizeof *mutators || recv->k != CV_SEQ || (recv->sub & SEQ_TUPLE) ||
      callee->kids[0]->kind != FS_N_NAME)
    return;
  cv *items = fsC_alloc(c, ((size_t)recv->n + 1) * sizeof *items);
  memcpy(items, recv->p, recv->n * sizeof *items);
  size_t n = recv->n;
  if (!strcmp(m, "extend") && npos == 1) items[n++] = fsC_elements(c, &pos[0]);
  if (!strcmp(m, "insert") && npos == 2) items[n++] = pos[1];
  fsC_rebind(c, callee->kids[0]->str, fsC_unsized_seq(c, items, n, 0));
}

/* A call the checker does not model may change a list or dict it is given
 * in place (`coll.broadcast_object_list(buf, src=1)` fills buf): a named
 * one among its arguments is unknown after the call. */
static cv unknown_call(C *c, const fs_node *n) {
  for (uint32_t i = 1; i < n->nkids; i++) {
    const fs_node *a = n->kids[i]->kind == FS_N_KWARG || n->kids[i]->kind == FS_N_STARRED ? n->kids[i]->kids[0]
                                                                                            : n->kids[i];
    if (a->kind != FS_N_NAME) continue;
    nkey key = key_name(a);
    uintptr_t *var = var_slot(c, &key);
    const cv *v = var ? &c->slots[*var] : NULL;
    if (v && ((v->k == CV_SEQ && !(v->sub & SEQ_TUPLE)) || v->k == CV_DICT)) {
      log_old(c, TR_SLOT, (uint32_t)*var);
      c->slots[*var] = fsC_unknown();
    }
  }
  return fsC_unknown();
}

struct fsC_row *fsC_row(C *c, const fsSig *sig) {
  if (!c->rows) {
    c->sig_rows = fsSig_all(&c->nsig_rows);
    c->rows = fsA_xrealloc(NULL, c->nsig_rows * sizeof *c->rows);
    memset(c->rows, 0, c->nsig_rows * sizeof *c->rows);
  }
  return sig >= c->sig_rows && sig < c->sig_rows + c->nsig_rows ? &c->rows[sig - c->sig_rows] : NULL;
}

/* Whether a row is also one of Python's own builtins: asked once per row. */
static int python_builtin_row(C *c, const fsSig *sig) {
  struct fsC_row *r = fsC_row(c, sig);
  if (!r) return fsSig_python_builtin(sig->name);
  if (!r->py_builtin) r->py_builtin = fsSig_python_builtin(sig->name) ? 2 : 1;
  return r->py_builtin == 2;
}

/* Calls: builtins through signatures.h, defs inlined, models forwarded. */
static cv ev_call(C *c, const fs_node *n) {
  const fs_node *callee = n->kids[0];
  for (uint32_t i = 1; i < n->nkids; i++)
    if (n->kids[i]->kind == FS_N_STARRED) { /* `f(*a, **k)`: which parameter gets what is unknown */
      ev(c, callee->kind == FS_N_ATTR ? callee->kids[0] : callee);
      for (uint32_t j = 1; j < n->nkids; j++)
        ev(c, n->kids[j]->kind == FS_N_STARRED || n->kids[j]->kind == FS_N_KWARG ? n->kids[j]->kids[0] : n->kids[j]);
      return unknown_call(c, n);
    }
  size_t npos = 0, nkw = 0;
  for (uint32_t i = 1; i < n->nkids; i++) if (n->kids[i]->kind == FS_N_KWARG) nkw++; else npos++;
  fsC_argbuf buf;
  fsC_argbuf_init(c, &buf, npos, nkw);
  cv *pos = buf.pos, *kwv = buf.kwv;
  const char **kw = buf.kw;
  int *pos_slot = buf.ps, *kw_slot = buf.ks;
  cv recv = fsC_unknown(), fn;
  const char *mname = NULL;
  if (callee->kind == FS_N_ATTR) {
    recv = ev(c, callee->kids[0]);
    mname = callee->str;
    if (recv.k == CV_CLASS && recv.sub == CLS_NS) { /* nn.Linear(...): a builtin, or not modelled */
      fn = ns_attr(c, &recv, mname);
      mname = NULL;
    }
  } else {
    fn = ev(c, callee);
  }
  if (!mname && !c->python && fn.k == CV_CLASS && fn.sub == CLS_NS) { /* the run has no such builtin */
    fs_diag *g = fsC_report(c, FS_SEV_ERROR, "unsupported", callee->loc, "`%s` is not supported at run time yet",
                            (const char *)fn.p);
    if (g) fsD_help(g, "torch and Lightning names the runtime has are listed in docs/builtins.md");
    return fsC_unknown();
  }
  for (uint32_t i = 1, p = 0, k = 0; i < n->nkids; i++) {
    const fs_node *a = n->kids[i];
    if (a->kind == FS_N_KWARG) { kw[k] = a->str; kwv[k++] = ev(c, a->kids[0]); }
    else pos[p++] = ev(c, a);
  }
  if (mname) {
    const char *t = fsC_type_name(c, &recv);
    if (!has_members(t) && !pyclass_of(c, &recv)) return unknown_call(c, n);
    const fsSig *sig = t ? sig_lookup(c, t, mname) : NULL;
    const pyclass *cls = sig ? NULL : pyclass_of(c, &recv);
    if (cls) { /* the class's own method, with self bound; else an attribute its code set */
      const fs_node *def = py_method(cls, mname);
      if (!def || !fsA_def_plain(def)) return unknown_call(c, n);
      fsC_outside_call(c, n, &recv, mname, def);
      pos[-1] = recv; /* self, in the slot the buffer keeps before pos */
      return fsC_call_def(c, def, n, pos - 1, npos + 1, kw, kwv, nkw);
    }
    if (!sig && real_member(c, t, mname)) {
      list_mutated(c, callee, &recv, mname, pos, npos);
      return fsC_unknown();
    }
    if (!sig || sig->kind != FSSIG_METHOD) {
      fs_diag *g = fsC_report(c, FS_SEV_ERROR, "attr", callee->name_loc,
                              sig ? "'%s' object attribute '%s' is not callable" : "'%s' object has no attribute '%s'",
                              display_type(c, &recv), mname);
      const char **names;
      size_t k = g && !sig ? members_of(c, t, &names) : 0;
      if (k) suggest(g, mname, names, k, callee->name_loc);
      return fsC_unknown();
    }
    if (fsC_bind(c, sig, n, pos_slot, kw_slot)) return fsC_unknown();
    check_types(c, sig, n, pos, npos, kwv, nkw, pos_slot, kw_slot);
    cargs a = {n, sig, pos, npos, kw, kwv, nkw, pos_slot, kw_slot};
    cv out;
    if (fsC_api_method(c, &a, &recv, &out)) return out;
    if (!strcmp(sig->returns, "Tensor")) return recv.k == CV_TENSOR ? recv : (cv){.k = CV_TENSOR};
    /* a module's own method returns the module (model.train()); another
     * object's (setup_module of a fabric known only as one of several) a
     * module not known here */
    if (!strcmp(sig->returns, "Module")) return t && !strcmp(t, "Module") ? recv : fsC_unknown();
    if (!strcmp(sig->returns, "None")) return fsC_const(c, fsV_none());
    return fsC_unknown();
  }
  if (fn.k == CV_CLASS && fn.sub == CLS_SIG && fn.id) { /* the real API's arguments: not bound */
    const fsSig *sig = fn.p;
    if (sig->kind == FSSIG_LAYER) return fsC_new_layer(c, sig, n, pos, npos, kw, kwv, nkw);
    /* raisesD: torch.device("cpu"/"cuda"[, index]): a device of that type, as in a
     * .fab (a strategy's parallel_devices, R82, R83); meta stays unknown here */
    if (!strcmp(sig->name, "device") && npos && fsC_device_type(fsC_cval(&pos[0])) != FSF_PD_NONE &&
        fsC_device_type(fsC_cval(&pos[0])) != FSF_PD_OTHER)
      return fsC_new_ctx(c, CTX_DEVICE, (int)fsC_device_type(fsC_cval(&pos[0])), 0, n->loc);
    if (strcmp(sig->returns, "Tensor")) return fsC_unknown();
    cv t = {.k = CV_TENSOR}; /* computed from a set-up model's output when an argument is */
    for (size_t i = 0; i < npos + nkw && !t.id; i++) {
      const cv *x = i < npos ? &pos[i] : &kwv[i - npos];
      if (x->k == CV_TENSOR) t.id = x->id;
    }
    return t;
  }
  if (fn.k == CV_CLASS && fn.sub == CLS_SIG) {
    const fsSig *sig = fn.p;
    if (sig->kind == FSSIG_FUNC && !sig->params && (npos || nkw)) {
      fsC_report(c, FS_SEV_ERROR, "call", n->loc, "%s() takes no arguments (%zu given)", sig->name, npos + nkw);
      return fsC_unknown();
    }
    if (c->python && sig->params && python_builtin_row(c, sig)) {
      /* Python's own builtin takes more than its row (str(b, "utf-8"),
       * print(file=)): a call the row cannot bind is unknown, not an error */
      char *err = NULL;
      int bad = fsSig_bind(sig, npos, kw, nkw, pos_slot, kw_slot, &err);
      free(err);
      if (bad) return fsC_unknown();
    }
    if (sig->params && fsC_bind(c, sig, n, pos_slot, kw_slot)) return fsC_unknown();
    if (!sig->params && (npos || nkw)) {
      fsC_report(c, FS_SEV_ERROR, "call", n->loc, "%s() takes no arguments (%zu given)", sig->name, npos + nkw);
      return fsC_unknown();
    }
    if (sig->params) check_types(c, sig, n, pos, npos, kwv, nkw, pos_slot, kw_slot);
    cargs a = {n, sig, pos, npos, kw, kwv, nkw, pos_slot, kw_slot};
    cv out;
    if (fsC_api_builtin(c, &a, &out)) return out;
    if (sig->kind == FSSIG_LAYER) return fsC_new_layer(c, sig, n, pos, npos, kw, kwv, nkw);
    if (!strcmp(sig->returns, "None")) return fsC_const(c, fsV_none());
    return fsC_unknown();
  }
  if (fn.k == CV_CLASS && fn.sub == CLS_MODEL) {
    const fs_node *decl = fn.p;
    fsC_shape_model(c, decl, n, pos, npos, kw, kwv, nkw);
    return fsC_new_model(c, decl->str, n->loc);
  }
  if (fn.k == CV_CLASS && fn.sub == CLS_PY) return new_instance(c, fn.p, n, pos, npos, kw, kwv, nkw);
  if (fn.k == CV_FUNC) return fsC_call_def(c, fn.p, n, pos, npos, kw, kwv, nkw);
  if (fn.k == CV_OBJ || fn.k == CV_PHI) {
    const char *t = fsC_type_name(c, &fn);
    if (t && !strcmp(t, "Module")) return fsC_forward(c, &fn, n->loc);
  }
  if (fn.k == CV_CONST || fn.k == CV_SEQ || fn.k == CV_DICT) {
    fsC_report(c, FS_SEV_ERROR, "type", n->loc, "'%s' object is not callable", fsC_type_name(c, &fn));
    return fsC_unknown();
  }
  return unknown_call(c, n);
}

/* `a is b` where it is known: None, True and False are single objects, and
 * an object the checker tracks is none of them. 1 same, 0 not, -1 unknown. */
static int identical(const cv *a, const cv *b) {
  const fs_value *x = fsC_cval(a), *y = fsC_cval(b);
  int xs = x && (x->type == FSV_NONE || x->type == FSV_BOOL), ys = y && (y->type == FSV_NONE || y->type == FSV_BOOL);
  if (xs && ys) return x->type == y->type && fsV_equal(x, y);
  int aobj = a->k == CV_OBJ || a->k == CV_SEQ || a->k == CV_DICT || a->k == CV_TENSOR || a->k == CV_FUNC || a->k == CV_CLASS;
  int bobj = b->k == CV_OBJ || b->k == CV_SEQ || b->k == CV_DICT || b->k == CV_TENSOR || b->k == CV_FUNC || b->k == CV_CLASS;
  if ((xs && bobj) || (ys && aobj)) return 0;
  return -1;
}

cv fsC_eval(C *c, const fs_node *n) { return ev(c, n); }

static cv unary(C *c, const fs_node *n, cv a) {
  if (n->op == FS_OP_INVERT) return fsC_unknown();
  const fs_value *x = fsC_cval(&a);
  if (x && x->type == FSV_INT && (n->op == FS_OP_POS || (n->op == FS_OP_NEG && x->u.i != INT64_MIN)))
    return fsC_int(c, n->op == FS_OP_POS ? x->u.i : -x->u.i); /* -1: no malloc'd value */
  if (x && x->type == FSV_FLOAT && (n->op == FS_OP_POS || n->op == FS_OP_NEG))
    return const_float(c, n->op == FS_OP_POS ? x->u.f : -x->u.f);
  if (a.k == CV_CONST) {
    fsV_clearerr();
    fs_value *r = fsV_unop(NULL, n->op, (fs_value *)a.p);
    if (!r && fsV_error()[0]) fsC_report(c, FS_SEV_ERROR, "type", n->loc, "%s", fsV_error());
    return fsC_const(c, r);
  }
  if (n->op == FS_OP_NOT) {
    int t = truth(&a);
    return t < 0 ? fsC_unknown() : fsC_const(c, fsV_bool(!t));
  }
  return a.k == CV_TENSOR ? a : fsC_unknown();
}

/* a op b for a binary operator other than and/or */
static cv binary(C *c, const fs_node *n, cv a, cv b) {
  if (n->op == FS_OP_IS || n->op == FS_OP_IS_NOT) {
    int same = identical(&a, &b);
    return same < 0 ? fsC_unknown() : fsC_const(c, fsV_bool((n->op == FS_OP_IS) == same));
  }
  if (n->op >= FS_OP_MATMUL) return fsC_unknown(); /* @, <<, >>, &, |, ^: not modelled */
  return binop(c, n, n->op, a, b);
}

/* `a < b <= c`: false at the first link known false, true when every link
 * is known true, else unknown (a link that would raise: unknown). */
static cv compare_chain(C *c, const fs_node *n, const cv *vals) {
  int known = 1;
  for (uint32_t j = 0; j + 1 < n->nkids && j < n->slen; j++) {
    fs_op op = (fs_op)(unsigned char)n->str[j];
    int t = -1;
    if (op == FS_OP_IS || op == FS_OP_IS_NOT) {
      int same = identical(&vals[j], &vals[j + 1]);
      t = same < 0 ? -1 : (op == FS_OP_IS) == same;
    } else if (vals[j].k == CV_CONST && vals[j + 1].k == CV_CONST) {
      fsV_clearerr();
      fs_value *r = fsV_binop(NULL, op, (fs_value *)vals[j].p, (fs_value *)vals[j + 1].p);
      if (r) t = fsV_truthy(r);
      fsV_release(r);
      fsV_clearerr();
    }
    if (t == 0) return fsC_const(c, fsV_bool(0));
    if (t < 0) known = 0;
  }
  return known ? fsC_const(c, fsV_bool(1)) : fsC_unknown();
}

/* A comprehension or generator: its names live in a scope of its own (a
 * closure over the enclosing one); each target is any element of its
 * iterable, and the result is an unsized list (dict) of what the element
 * may be, so parameters gathered by `[p for p in ...]` keep their provenance. */
static cv ev_comp(C *c, const fs_node *n) {
  if (c->nframes == 32 || n->nkids < 3) return fsC_unknown();
  cv first = ev(c, n->kids[2]->kids[1]); /* Python evaluates it outside the scope */
  frame f;
  memset(&f, 0, sizeof f);
  f.fn = n;
  f.closure = 1;
  c->frames[c->nframes++] = &f;
  for (uint32_t i = 2; i < n->nkids; i++) {
    const fs_node *g = n->kids[i];
    cv it = i == 2 ? first : ev(c, g->kids[1]);
    assign(c, g->kids[0], fsC_elements(c, &it));
    for (uint32_t j = 2; j < g->nkids; j++) ev(c, g->kids[j]);
  }
  cv elem = ev(c, n->kids[0]);
  cv val = fsC_kid(n, 1) ? ev(c, n->kids[1]) : fsC_unknown();
  c->nframes--;
  map_free(c, &f.locals);
  if (n->op != FS_COMP_DICT) return fsC_unsized_seq(c, &elem, 1, 0);
  cv *kv = fsC_alloc(c, 2 * sizeof *kv);
  kv[0] = elem;
  kv[1] = val;
  return (cv){.k = CV_DICT, .sub = SEQ_UNSIZED, .n = 1, .p = kv};
}

static cv ev_node(C *c, const fs_node *n);

/* Every expression's value passes here: an editor's query sees it. Inline:
 * a call and a return per expression were 2% of a big check. */
static inline __attribute__((always_inline)) cv ev(C *c, const fs_node *n) {
  cv v = ev_node(c, n);
  if (c->o->query) fsC_query_seen(c, n->loc, &v);
  return v;
}

static cv ev_node(C *c, const fs_node *n) {
  switch (n->kind) {
  case FS_N_NAME: return ev_name(c, n);
  case FS_N_INT: return fsC_int(c, n->ival);
  case FS_N_FLOAT: return const_float(c, n->fval);
  case FS_N_STR: return str_lit(c, n);
  case FS_N_TRUE: return fsC_const(c, fsV_bool(1));
  case FS_N_FALSE: return fsC_const(c, fsV_bool(0));
  case FS_N_NONE: return fsC_const(c, fsV_none());
  case FS_N_FSTR:
    for (uint32_t i = 0; i < n->nkids; i++)
      if (n->kids[i] && n->kids[i]->kind == FS_N_FMT) ev(c, n->kids[i]->kids[0]);
    return fsC_unknown();
  case FS_N_LIST: case FS_N_TUPLE: case FS_N_DICT: {
    for (uint32_t i = 0; i < n->nkids; i++)
      if (!n->kids[i] || n->kids[i]->kind == FS_N_STARRED) { /* `[*a]`, `{**m}`: contents unknown */
        for (uint32_t j = 0; j < n->nkids; j++)
          if (n->kids[j]) ev(c, n->kids[j]->kind == FS_N_STARRED ? n->kids[j]->kids[0] : n->kids[j]);
        return fsC_unknown();
      }
    cv *items = fsC_alloc(c, (n->nkids + 1) * sizeof *items);
    for (uint32_t i = 0; i < n->nkids; i++) items[i] = ev(c, n->kids[i]);
    if (n->kind != FS_N_DICT) return (cv){.k = CV_SEQ, .sub = n->kind == FS_N_TUPLE, .n = n->nkids, .p = items};
    /* keys first, then values */
    uint32_t m = n->nkids / 2;
    cv *kv = fsC_alloc(c, (n->nkids + 1) * sizeof *kv);
    for (uint32_t i = 0; i < m; i++) { kv[i] = items[2 * i]; kv[m + i] = items[2 * i + 1]; }
    return (cv){.k = CV_DICT, .n = m, .p = kv};
  }
  case FS_N_UNARY: {
    cv a = ev(c, n->kids[0]);
    if (!ranked(&a)) return unary(c, n, a);
    cv alts[MAXRANKS];
    for (uint32_t i = 0; i < c->rank_n; i++) alts[i] = unary(c, n, rank_alt(&a, i));
    return from_ranks(c, alts);
  }
  case FS_N_BINARY: {
    cv a = ev(c, n->kids[0]);
    if (n->op == FS_OP_AND || n->op == FS_OP_OR) {
      int t = truth(&a);
      if (ranked(&a)) { /* each rank's own short circuit */
        cv b = ev(c, n->kids[1]), alts[MAXRANKS];
        for (uint32_t i = 0; i < c->rank_n; i++) {
          cv x = rank_alt(&a, i);
          int ti = truth(&x);
          alts[i] = ti == (n->op == FS_OP_OR) ? x : ti < 0 ? fsC_unknown() : rank_alt(&b, i);
        }
        return from_ranks(c, alts);
      }
      if (t == (n->op == FS_OP_OR)) return a;
      cv b = ev(c, n->kids[1]);
      return t < 0 ? fsC_unknown() : b;
    }
    cv b = ev(c, n->kids[1]);
    if (!ranked(&a) && !ranked(&b)) return binary(c, n, a, b);
    cv alts[MAXRANKS];
    for (uint32_t i = 0; i < c->rank_n; i++) alts[i] = binary(c, n, rank_alt(&a, i), rank_alt(&b, i));
    return from_ranks(c, alts);
  }
  case FS_N_COMPARE: {
    cv *vals = fsC_alloc(c, (n->nkids + 1) * sizeof *vals), alts[MAXRANKS];
    int any_ranked = 0;
    for (uint32_t i = 0; i < n->nkids; i++) { vals[i] = ev(c, n->kids[i]); any_ranked |= ranked(&vals[i]); }
    if (!any_ranked) return compare_chain(c, n, vals);
    cv *one = fsC_alloc(c, (n->nkids + 1) * sizeof *one);
    for (uint32_t r = 0; r < c->rank_n; r++) {
      for (uint32_t i = 0; i < n->nkids; i++) one[i] = rank_alt(&vals[i], r);
      alts[r] = compare_chain(c, n, one);
    }
    return from_ranks(c, alts);
  }
  case FS_N_NAMEDEXPR: {
    cv v = ev(c, n->kids[1]);
    fsC_setvar(c, n->kids[0]->str, v);
    return v;
  }
  case FS_N_COND: {
    cv k = ev(c, n->kids[0]);
    int t = truth_on(c, &k);
    if (t >= 0) return ev(c, n->kids[t ? 1 : 2]);
    if (ranked(&k)) { /* each rank its own arm */
      cv a = ev(c, n->kids[1]), b = ev(c, n->kids[2]), alts[MAXRANKS];
      for (uint32_t i = 0; i < c->rank_n; i++) {
        cv x = rank_alt(&k, i);
        int ti = truth(&x);
        alts[i] = ti == 1 ? a : ti == 0 ? b : cv_join(c, &a, &b, 0);
      }
      return from_ranks(c, alts);
    }
    cv a = ev(c, n->kids[1]), b = ev(c, n->kids[2]);
    return cv_join(c, &a, &b, new_reason(c, n->kids[0]->loc, 0, 1));
  }
  case FS_N_CALL: return ev_call(c, n);
  case FS_N_ATTR: return ev_attr(c, n);
  case FS_N_INDEX: return ev_index(c, n);
  case FS_N_COMP: return ev_comp(c, n);
  default: return fsC_unknown();
  }
}

/* ---- statements --------------------------------------------------------- */

/* A dict with key k set to v (copied: the old value may live on in a join). */
static cv dict_with(C *c, const cv *d, const cv *k, const cv *v) {
  const cv *kv = d->p;
  uint32_t n = d->n, at = n;
  int exact = !fsC_unsized(d) && k->k == CV_CONST;
  for (uint32_t i = 0; exact && i < n; i++)
    if (kv[i].k != CV_CONST) exact = 0;
    else if (fsV_equal(kv[i].p, k->p)) at = i;
  if (!exact) /* which entry k is, is not known: one more possible pair */
    for (uint32_t i = 0; i < n; i++)
      if (cv_eq(&kv[i], k) && cv_eq(&kv[n + i], v)) return *d;
  if (!exact && n == MAXALT) return fsC_unknown();
  uint32_t m = at < n ? n : n + 1;
  cv *out = fsC_alloc(c, 2 * (size_t)m * sizeof *out);
  for (uint32_t i = 0; i < n; i++) { out[i] = kv[i]; out[m + i] = kv[n + i]; }
  out[at] = *k;
  out[m + at] = *v;
  return (cv){.k = CV_DICT, .sub = exact ? 0 : SEQ_UNSIZED, .n = m, .p = out};
}

/* `name[k] = v` on a dict or list the checker holds: the variable gets the
 * container with the item set, exactly where k is known, else as one more
 * thing its elements may be. */
static void store_item(C *c, const fs_node *t, cv v) {
  cv o = ev(c, t->kids[0]);
  const fs_node *ix = t->kids[1];
  cv k = fsC_unknown();
  if (ix->kind == FS_N_SLICE) {
    for (uint32_t i = 0; i < 3; i++) if (fsC_kid(ix, i)) ev(c, ix->kids[i]);
    v = fsC_elements(c, &v); /* xs[a:b] = items: a length not known */
  } else {
    k = ev(c, ix);
  }
  if (t->kids[0]->kind != FS_N_NAME) return;
  cv r;
  if (o.k == CV_DICT && ix->kind != FS_N_SLICE) {
    r = dict_with(c, &o, &k, &v);
  } else if (o.k == CV_SEQ && !(o.sub & SEQ_TUPLE)) {
    const fs_value *i = fsC_cval(&k);
    if (!fsC_unsized(&o) && i && i->type == FSV_INT) {
      int64_t at = i->u.i < 0 ? i->u.i + o.n : i->u.i;
      if (at < 0 || at >= (int64_t)o.n) {
        fsC_report(c, FS_SEV_ERROR, "index", t->loc, "list assignment index out of range");
        return;
      }
      cv *items = fsC_alloc(c, (o.n + 1) * sizeof *items);
      memcpy(items, o.p, o.n * sizeof *items);
      items[at] = v;
      r = (cv){.k = CV_SEQ, .n = o.n, .p = items};
    } else {
      cv *items = fsC_alloc(c, (o.n + 1) * sizeof *items);
      memcpy(items, o.p, o.n * sizeof *items);
      items[o.n] = v;
      r = fsC_unsized_seq(c, items, o.n + 1, 0);
    }
  } else {
    return;
  }
  fsC_rebind(c, t->kids[0]->str, r);
}

static void assign(C *c, const fs_node *t, cv v) {
  switch (t->kind) {
  case FS_N_NAME:
    if (c->o->query) fsC_query_seen(c, t->loc, &v);
    nkey k = key_name(t);
    setvar(c, &k, v);
    break;
  case FS_N_STARRED: assign(c, t->kids[0], fsC_unknown()); break;
  case FS_N_TUPLE: case FS_N_LIST: {
    for (uint32_t i = 0; i < t->nkids; i++)
      if (t->kids[i]->kind == FS_N_STARRED) v = fsC_unknown(); /* `a, *b = v`: lengths not modelled */
    if (fsC_unsized(&v)) { /* each target is any of its elements */
      cv e = fsC_elements(c, &v);
      for (uint32_t i = 0; i < t->nkids; i++) assign(c, t->kids[i], e);
      break;
    }
    if (v.k == CV_SEQ && v.n != t->nkids) {
      if (v.n > t->nkids)
        fsC_report(c, FS_SEV_ERROR, "value", t->loc, "too many values to unpack (expected %u)", t->nkids);
      else
        fsC_report(c, FS_SEV_ERROR, "value", t->loc, "not enough values to unpack (expected %u, got %u)",
                   t->nkids, v.n);
      v = fsC_unknown();
    }
    for (uint32_t i = 0; i < t->nkids; i++) {
      cv item = fsC_unknown();
      if (v.k == CV_SEQ) item = ((const cv *)v.p)[i];
      else if (v.k == CV_PHI) {
        /* unpack each path's tuple, then join per element */
        const cv *alts = v.p;
        int ok = 1;
        for (uint32_t a = 0; a < v.n; a++) ok &= alts[a].k == CV_SEQ && alts[a].n == t->nkids;
        if (ok) {
          item = ((const cv *)alts[0].p)[i];
          for (uint32_t a = 1; a < v.n; a++) item = cv_join(c, &item, &((const cv *)alts[a].p)[i], v.id);
        }
      }
      assign(c, t->kids[i], item);
    }
    break;
  }
  case FS_N_ATTR: {
    cv o = ev(c, t->kids[0]);
    if (o.k == CV_OBJ && c->objs[o.id].kind == OB_STRATEGY) { fsC_strategy_set_attr(c, o.id, t, &v); break; }
    const char *ty = fsC_type_name(c, &o);
    const fsSig *sig = has_members(ty) ? sig_lookup(c, ty, t->str) : NULL;
    if (!sig && pyclass_of(c, &o)) { set_attr(c, &o, t->str, v); break; } /* `self.fc = ...` */
    if (!has_members(ty)) break;
    if (!sig && real_member(c, ty, t->str)) break;
    if (!sig)
      fsC_report(c, FS_SEV_ERROR, "attr", t->name_loc, "'%s' object has no attribute '%s'",
                 display_type(c, &o), t->str);
    else if (!(sig->flags & FSSIG_SETTABLE))
      fsC_report(c, FS_SEV_ERROR, "attr", t->name_loc, "can't set attribute '%s' of '%s' object",
                 t->str, display_type(c, &o));
    break;
  }
  case FS_N_INDEX: store_item(c, t, v); break;
  default: break;
  }
}

static int64_t known_len(const cv *v) {
  if (fsC_unsized(v)) return -1;
  if (v->k == CV_SEQ || v->k == CV_DICT) return v->n;
  if (v->k == CV_CONST) {
    const fs_value *x = v->p;
    if (x->type == FSV_RANGE) return fsV_range_len(x);
    if (x->type == FSV_STR) return (int64_t)x->u.str.len;
  }
  return -1;
}

/* ---- loops ----------------------------------------------------------------
 * A loop of a known count up to UNROLL rounds (and no break or continue) is
 * analysed round by round, exactly. Any other runs its body twice, the
 * second round seeing what the first did, and is then widened: a variable
 * whose value the rounds changed is what any number of rounds may leave —
 * a number or string unknown, a list or dict unsized (its elements still
 * known as possibilities), an object either one (a join). A loop that may not
 * run at all is joined with the path that skips it. So a list grown in a loop
 * is never a guess that raises later (`xs[2]` after three appends). */

#define UNROLL 4

/* Whether a loop body can end a round early: break or continue at its level. */
static int jumps(const fs_node *b) {
  if (!b) return 0;
  switch (b->kind) {
  case FS_N_BREAK: case FS_N_CONTINUE: return 1;
  case FS_N_BLOCK: for (uint32_t i = 0; i < b->nkids; i++) if (jumps(b->kids[i])) return 1; return 0;
  case FS_N_IF: return jumps(b->kids[1]) || jumps(fsC_kid(b, 2));
  case FS_N_WITH: return jumps(b->kids[2]);
  case FS_N_FOR: return jumps(fsC_kid(b, 3)); /* an else runs at the outer loop's level */
  case FS_N_WHILE: return jumps(fsC_kid(b, 2));
  case FS_N_TRY: for (uint32_t i = 0; i < b->nkids; i++) if (jumps(i < 3 ? b->kids[i] : b->kids[i]->kids[1])) return 1; return 0;
  case FS_N_MATCH: for (uint32_t i = 1; i < b->nkids; i++) if (jumps(b->kids[i]->kids[2])) return 1; return 0;
  default: return 0;
  }
}

/* Numbers, strings, containers: what a count of rounds changes. */
static int is_data(const cv *v) {
  if (v->k == CV_PHI) {
    for (uint32_t i = 0; i < v->n; i++) if (is_data(&((const cv *)v->p)[i])) return 1;
    return 0;
  }
  return v->k == CV_CONST || v->k == CV_SEQ || v->k == CV_DICT;
}

static int same_items(const cv *a, const cv *b) {
  if (a->k != b->k || a->n != b->n || a->sub != b->sub) return 0;
  size_t n = a->k == CV_DICT ? 2 * (size_t)a->n : a->n;
  for (size_t i = 0; i < n; i++) if (!cv_eq(&((const cv *)a->p)[i], &((const cv *)b->p)[i])) return 0;
  return 1;
}

/* What a variable may hold after any number of rounds, given its value
 * after one (a) and after two (b). */
static cv widen(C *c, const cv *a, const cv *b, uint32_t why) {
  if (cv_eq(a, b)) return *b;
  if ((a->k == CV_SEQ || a->k == CV_DICT) && same_items(a, b)) return *b;
  if (a->k == CV_SEQ && b->k == CV_SEQ) {
    cv *items = fsC_alloc(c, ((size_t)a->n + b->n + 1) * sizeof *items);
    memcpy(items, a->p, a->n * sizeof *items);
    memcpy(items + a->n, b->p, b->n * sizeof *items);
    return fsC_unsized_seq(c, items, (size_t)a->n + b->n, (a->sub & b->sub & SEQ_TUPLE) != 0);
  }
  if (a->k == CV_DICT && b->k == CV_DICT) { /* b's pairs and a's, as possibilities */
    cv r = *b;
    r.sub |= SEQ_UNSIZED;
    const cv *kv = a->p;
    for (uint32_t i = 0; i < a->n && r.k == CV_DICT; i++) r = dict_with(c, &r, &kv[i], &kv[a->n + i]);
    return r;
  }
  if (is_data(a) || is_data(b)) return fsC_unknown();
  return cv_join(c, a, b, why);
}

/* The body run twice from the current state, then widened; may_skip: the
 * loop may not run at all. */
static void loop_rounds(C *c, const fs_node *target, cv item, const fs_node *body, int may_skip, fs_loc head) {
  int dead0 = c->dead;
  size_t m = mark(c);
  chgset A, B;
  for (int round = 0; round < 2; round++) {
    if (target) assign(c, target, item);
    block(c, body);
    c->dead = dead0;
    if (round == 0) record(c, m, &A);
  }
  capture(c, m, &B);
  uint32_t ra = new_reason(c, head, 1, 1), rb = new_reason(c, head, 1, 2);
  unsigned char few[256], *from_a = B.n < sizeof few ? few : fsA_xrealloc(NULL, B.n + 1);
  memset(from_a, 0, B.n + 1);
  for (size_t i = 0; i < A.n; i++) {
    const chg *x = &A.a[i];
    uint32_t *st = x->type == TR_SLOT ? c->stamp_s : c->stamp_o, *pos = x->type == TR_SLOT ? c->pos_s : c->pos_o;
    if (st[x->idx] != B.epoch) continue;
    chg *y = &B.a[pos[x->idx]];
    if (x->type == TR_SLOT) y->val.v = widen(c, &x->val.v, &y->val.v, ra);
    else y->val.o = cobj_join(&x->val.o, &y->val.o, ra, ra);
    from_a[pos[x->idx]] = 1;
  }
  for (size_t i = 0; i < B.n; i++) { /* first written in the second round: against the state before */
    chg *y = &B.a[i];
    if (from_a[i]) continue;
    if (y->type == TR_SLOT) y->val.v = widen(c, &c->slots[y->idx], &y->val.v, ra);
    else y->val.o = cobj_join(&c->objs[y->idx], &y->val.o, ra, ra);
  }
  if (from_a != few) free(from_a);
  chg_give(c, &A);
  if (may_skip) {
    chgset skip = {NULL, 0, 0, ++c->epoch};
    join_paths(c, &B, 0, &skip, 0, ra, rb);
    return;
  }
  c->marks--;
  for (size_t i = 0; i < B.n; i++) write_chg(c, &B.a[i]);
  chg_give(c, &B);
}

static void st_for(C *c, const fs_node *s) {
  cv it = ev(c, s->kids[1]);
  int64_t count = known_len(&it);
  if (count == 0) return;
  const fs_value *x = fsC_cval(&it);
  if (count > 0 && count <= UNROLL && !jumps(s->kids[2])) { /* exactly, round by round */
    for (int64_t i = 0; i < count && !c->dead; i++) {
      cv item = fsC_unknown();
      if (it.k == CV_SEQ) item = ((const cv *)it.p)[i];
      else if (it.k == CV_DICT) item = ((const cv *)it.p)[i];
      else if (x && x->type == FSV_RANGE) item = fsC_int(c, fsV_range_at(x, i));
      assign(c, s->kids[0], item);
      block(c, s->kids[2]);
    }
    return;
  }
  fs_loc head = {s->loc.start, s->kids[1]->loc.end};
  loop_rounds(c, s->kids[0], fsC_elements(c, &it), s->kids[2], count < 0 || jumps(s->kids[2]), head);
}

/* `__name__ == "__main__"` (either order): what a spawned child, which
 * imports the script as __mp_main__, does not run. */
static int main_guard(const fs_node *t) {
  if (t->kind != FS_N_BINARY || t->op != FS_OP_EQ) return 0;
  for (int i = 0; i < 2; i++) {
    const fs_node *a = t->kids[i], *b = t->kids[1 - i];
    if (a->kind == FS_N_NAME && !strcmp(a->str, "__name__") && b->kind == FS_N_STR && !strcmp(b->str, "__main__"))
      return 1;
  }
  return 0;
}

static void st_if(C *c, const fs_node *s) {
  cv k = ev(c, s->kids[0]);
  int t = truth_on(c, &k);
  const fs_node *els = fsC_kid(s, 2);
  if (t == 1 && main_guard(s->kids[0])) {
    c->main_guarded++;
    block(c, s->kids[1]);
    c->main_guarded--;
    return;
  }
  if (t == 1) { block(c, s->kids[1]); return; }
  if (t == 0) { if (els) (els->kind == FS_N_IF ? st : block)(c, els); return; }
  /* a condition that differs between ranks: each arm for the ranks taking it */
  uint32_t tm = c->rank_mask, fm = c->rank_mask, mask0 = c->rank_mask;
  fs_loc why0 = c->rank_why;
  if (ranked(&k)) {
    truth_ranks(c, &k, &tm, &fm);
    c->rank_why = s->kids[0]->loc;
  }
  int dead0 = c->dead;
  size_t m = mark(c);
  c->rank_mask = tm;
  block(c, s->kids[1]);
  int dA = c->dead;
  c->dead = dead0;
  chgset A, B;
  capture(c, m, &A);
  c->rank_mask = fm;
  if (els) (els->kind == FS_N_IF ? st : block)(c, els);
  c->rank_mask = mask0;
  c->rank_why = why0;
  int dB = c->dead;
  c->dead = dead0;
  capture(c, m, &B);
  join_paths(c, &A, dA, &B, dB, new_reason(c, s->kids[0]->loc, 0, 1), new_reason(c, s->kids[0]->loc, 0, 2));
}

static void st_with(C *c, const fs_node *s) {
  cv v = ev(c, s->kids[0]);
  int pushed = 0;
  if (fsC_is(&v, OB_CTX, c) && c->nctx < 64) { c->ctxs[c->nctx++] = v.id; pushed = 1; }
  if (fsC_kid(s, 1)) assign(c, s->kids[1], fsC_unknown());
  block(c, s->kids[2]);
  if (pushed) c->nctx--;
}

/* A block that may run or not: analysed on its own path, joined with the
 * path that skips it. */
static void maybe(C *c, const fs_node *b, fs_loc why) {
  int dead0 = c->dead;
  size_t m = mark(c);
  block(c, b);
  int dA = c->dead;
  c->dead = dead0;
  chgset A, B;
  capture(c, m, &A);
  capture(c, m, &B);
  join_paths(c, &A, dA, &B, 0, new_reason(c, why, 0, 1), new_reason(c, why, 0, 2));
}

/* The names a match pattern binds (captures), as unknown values. */
static void bind_captures(C *c, const fs_node *p) {
  if (!p) return;
  switch (p->kind) {
  case FS_N_NAME: if (strcmp(p->str, "_") != 0) fsC_setvar(c, p->str, fsC_unknown()); return;
  case FS_N_ATTR: return; /* a value pattern */
  case FS_N_CALL: for (uint32_t i = 1; i < p->nkids; i++) bind_captures(c, p->kids[i]); return;
  case FS_N_KWARG: case FS_N_STARRED: bind_captures(c, p->kids[0]); return;
  case FS_N_DICT: for (uint32_t i = 0; i < p->nkids; i++) if (i % 2 || (p->kids[i] && p->kids[i]->kind == FS_N_STARRED)) bind_captures(c, p->kids[i]); return;
  case FS_N_LIST: case FS_N_TUPLE: case FS_N_MATCHAS: for (uint32_t i = 0; i < p->nkids; i++) bind_captures(c, p->kids[i]); return;
  case FS_N_BINARY: if (p->op == FS_OP_BITOR) { bind_captures(c, p->kids[0]); bind_captures(c, p->kids[1]); } return;
  default: return;
  }
}

/* while, try and match, which the checker does not model exactly: a loop
 * body, an else, a handler or a case may run or not. */
static void st_python(C *c, const fs_node *s) {
  switch (s->kind) {
  case FS_N_WHILE: {
    cv k = ev(c, s->kids[0]);
    int t = truth(&k);
    if (t != 0) loop_rounds(c, NULL, fsC_unknown(), s->kids[1], t < 0 || jumps(s->kids[1]), s->kids[0]->loc);
    if (s->kids[2]) maybe(c, s->kids[2], s->kids[0]->loc);
    break;
  }
  case FS_N_TRY:
    block(c, s->kids[0]);
    block(c, s->kids[1]);
    for (uint32_t i = 3; i < s->nkids && !c->dead; i++) {
      const fs_node *h = s->kids[i];
      if (h->kids[0]) ev(c, h->kids[0]);
      if (h->kids[2]) fsC_setvar(c, h->kids[2]->str, fsC_unknown());
      maybe(c, h->kids[1], h->loc);
    }
    block(c, s->kids[2]);
    break;
  case FS_N_MATCH:
    ev(c, s->kids[0]);
    for (uint32_t i = 1; i < s->nkids && !c->dead; i++) {
      const fs_node *k = s->kids[i];
      bind_captures(c, k->kids[0]);
      if (k->kids[1]) ev(c, k->kids[1]);
      maybe(c, k->kids[2], k->kids[0]->loc);
    }
    break;
  default: break;
  }
}

/* `import torch.nn as nn`, `from lightning.fabric import Fabric`: each name
 * is what pynames.c says the dotted name is (a relative import's is unknown). */
static void st_import(C *c, const fs_node *s) {
  const char *from = s->kind == FS_N_IMPORTFROM && !s->op ? s->str : NULL;
  for (uint32_t i = 0; i < s->nkids; i++) {
    const fs_node *a = s->kids[i];
    if (!strcmp(a->str, "*")) { c->star_import = 1; continue; }
    const char *bound = a->kids[0] ? a->kids[0]->str : a->str, *dotted = a->str;
    if (s->kind == FS_N_IMPORTFROM) {
      if (!from) { fsC_setvar(c, bound, fsC_unknown()); continue; }
      size_t m = strlen(from), k = strlen(a->str);
      char *d = fsC_alloc(c, m + k + 2);
      memcpy(d, from, m);
      d[m] = '.';
      memcpy(d + m + 1, a->str, k + 1);
      dotted = d;
    } else if (!a->kids[0]) { /* `import a.b` binds a */
      size_t n = strcspn(a->str, ".");
      if (a->str[n]) bound = dotted = fsC_text(c, (fs_loc){a->loc.start, a->loc.start + (uint32_t)n});
    }
    fsC_setvar(c, bound, ns_value(c, dotted));
  }
}

/* `@torch.no_grad()`, `@torch.inference_mode()`, `@torch.enable_grad()`
 * (called or not): the decorated function is the function. */
static int grad_mode_decorator(const fs_node *d) {
  const fs_node *f = d->kind == FS_N_CALL && d->nkids == 1 ? d->kids[0] : d;
  const char *name = f->kind == FS_N_NAME || f->kind == FS_N_ATTR ? f->str : NULL;
  return name && (!strcmp(name, "no_grad") || !strcmp(name, "inference_mode") || !strcmp(name, "enable_grad"));
}

/* fsA_def_plain but for decorators: not async, every parameter positional-or-keyword. */
static int params_plain(const fs_node *def) {
  const fs_node *params = def->kids[0];
  for (uint32_t i = 0; i < params->nkids; i++)
    if (params->kids[i]->op != FS_PARAM_PLAIN) return 0;
  return !def->op;
}

static void st(C *c, const fs_node *s) {
  const fs_node *prev = c->stmt;
  c->stmt = s;
  switch (s->kind) {
  case FS_N_EXPR: ev(c, s->kids[0]); break;
  case FS_N_ASSIGN: {
    cv v = ev(c, s->kids[1]);
    assign(c, s->kids[0], v);
    for (uint32_t i = 2; i < s->nkids; i++) assign(c, s->kids[i], v); /* `a = b = v` */
    break;
  }
  case FS_N_AUGASSIGN: {
    cv a = ev(c, s->kids[0]), b = ev(c, s->kids[1]);
    assign(c, s->kids[0], s->op >= FS_OP_MATMUL ? fsC_unknown() : binop(c, s, s->op, a, b));
    break;
  }
  case FS_N_ANNASSIGN:
    if (s->kids[2]) assign(c, s->kids[0], ev(c, s->kids[2]));
    break;
  case FS_N_IF: st_if(c, s); break;
  case FS_N_FOR: st_for(c, s); if (s->nkids > 3) block(c, s->kids[3]); break;
  case FS_N_WITH: st_with(c, s); break;
  case FS_N_WHILE: case FS_N_TRY: case FS_N_MATCH: st_python(c, s); break;
  case FS_N_IMPORT: case FS_N_IMPORTFROM: st_import(c, s); break;
  case FS_N_CLASS: st_class(c, s); break;
  case FS_N_TYPEALIAS: fsC_setvar(c, s->kids[0]->str, fsC_unknown()); break;
  case FS_N_GLOBAL: /* the def may bind these module names: unknown where not bound yet */
    for (uint32_t i = 0; c->nframes && i < s->nkids; i++) {
      int fresh = 0;
      nkey k = key_str(s->kids[i]->str);
      uintptr_t *g = map_slot(c, &c->globals, &k, 1, &fresh);
      if (!fresh) continue;
      GROW(c, c->slots, c->nslots, c->capslots);
      c->slots[c->nslots] = fsC_unknown();
      *g = c->nslots++;
    }
    break;
  case FS_N_RAISE:
    for (uint32_t i = 0; i < 2; i++) if (s->kids[i]) ev(c, s->kids[i]);
    c->dead = 1;
    break;
  case FS_N_DEF: {
    /* Decorators run (their names are checked); torch's grad-mode ones
     * (`@torch.no_grad()`) return the function itself. A def under another
     * decorator is unknown, its body analysed once for its own errors. */
    const fs_node *decos = fsC_kid(s, 2);
    int transparent = 1;
    for (uint32_t i = 0; decos && i < decos->nkids; i++) {
      ev(c, decos->kids[i]);
      transparent &= grad_mode_decorator(decos->kids[i]);
    }
    if (!params_plain(s)) { fsC_setvar(c, s->str, fsC_unknown()); break; } /* async, *args ... */
    fsC_setvar(c, s->str, transparent ? (cv){.k = CV_FUNC, .p = s} : fsC_unknown());
    def_record(c, s, c->nframes > 0);
    break;
  }
  case FS_N_MODEL:
    fsC_setvar(c, s->str, (cv){.k = CV_CLASS, .sub = CLS_MODEL, .p = s});
    fsC_declare_model(c, s);
    break;
  case FS_N_RETURN: {
    cv v = fsC_kid(s, 0) ? ev(c, s->kids[0]) : fsC_const(c, fsV_none());
    if (!c->nframes) {
      fsC_report(c, FS_SEV_ERROR, "syntax", s->loc, "'return' outside function");
      break;
    }
    frame *f = c->frames[c->nframes - 1];
    f->ret = f->has_ret ? cv_join(c, &f->ret, &v, 0) : v;
    f->has_ret = 1;
    c->dead = 1;
    break;
  }
  case FS_N_BREAK: case FS_N_CONTINUE: c->dead = 1; break;
  case FS_N_ASSERT: {
    cv k = ev(c, s->kids[0]);
    cv msg = fsC_kid(s, 1) ? ev(c, s->kids[1]) : fsC_unknown();
    uint32_t maybe_true, maybe_false, fails;
    truth_ranks(c, &k, &maybe_true, &maybe_false);
    fails = maybe_false & ~maybe_true; /* the ranks on which it is known to fail */
    if (fails) {
      /* Rank 0 is in every run: failing there, the run fails whatever its
       * size, an error. Failing only on other ranks is a matter for the run
       * (it stops there, the launcher names the rank): a warning saying which. */
      int everywhere = !rank_restricted(c, fails), rank0 = fails & 1;
      char *text = msg.k == CV_CONST ? fsV_tostr(msg.p) : NULL;
      fs_diag *g = fsC_report(c, rank0 ? FS_SEV_ERROR : FS_SEV_WARNING, "assert", s->loc, "AssertionError%s%s",
                              text ? ": " : "", text ? text : "");
      free(text);
      fs_loc why0 = c->rank_why;
      if (ranked(&k)) c->rank_why = s->kids[0]->loc; /* the assert's own condition splits the ranks */
      if (g && !everywhere) rank_note(c, g, fails);
      c->rank_why = why0;
      if (g && !rank0)
        fsD_help(g, "a run fails there on those ranks (and the launcher stops the others); the check leaves it to the run");
    }
    break;
  }
  default: break;
  }
  c->stmt = prev;
}

static void block(C *c, const fs_node *b) {
  if (!b) return;
  if (b->kind != FS_N_BLOCK) { if (!out_of_budget(c, b)) st(c, b); return; }
  for (uint32_t i = 0; i < b->nkids && !c->dead && !out_of_budget(c, b->kids[i]); i++) {
    if (i + 1 < b->nkids) __builtin_prefetch(b->kids[i + 1]);
    st(c, b->kids[i]);
  }
}

/* ---- def calls: analysed at each call site with the argument values ------ */

int fsC_enter(C *c, frame *f, const fs_node *fn, const fs_node *call, const cv *pos, size_t npos,
              const char *const *kw, const cv *kwv, size_t nkw) {
  fs_loc at = call ? call->loc : fn->name_loc;
  for (int i = 0; i < c->nframes; i++)
    if (c->frames[i]->fn == fn) {
      if (c->python && fn->kind == FS_N_DEF) return -1; /* Python recurses: the result is unknown */
      fsC_report(c, FS_SEV_ERROR, "recursion", at, fn->kind == FS_N_MODEL ? "model `%s` contains itself"
                 : "recursion is not supported: `%s` calls itself", fn->str);
      return -1;
    }
  if (c->nframes == 32) return -1;
  const fs_node *params = fn->kids[0];
  uint32_t n = params->nkids;
  /* The bound values and the binding's tables live only through this
   * function: on the stack for the usual few parameters. */
  struct { cv vals[FEW_PARAMS]; unsigned char got[FEW_PARAMS]; fsSig_param ps[FEW_PARAMS]; } few;
  int small = n < FEW_PARAMS;
  cv *vals = small ? few.vals : fsC_alloc(c, (n + 1) * sizeof *vals);
  unsigned char *got = small ? few.got : fsC_alloc(c, n + 1);
  memset(got, 0, n + 1);
  if (!nkw && npos == n && n <= 64) { /* each parameter its argument, as fsSig_bind would say */
    for (uint32_t i = 0; i < n; i++) { vals[i] = pos[i]; got[i] = 1; }
  } else if (call || npos || nkw) {
    fsSig_param *ps = small ? few.ps : fsC_alloc(c, (n + 1) * sizeof *ps);
    for (uint32_t i = 0; i < n; i++)
      ps[i] = (fsSig_param){params->kids[i]->str, FSSIG_T_ANY, fsC_kid(params->kids[i], 0) ? "" : NULL, 0};
    fsSig sig = {fn->str, fn->kind == FS_N_MODEL ? FSSIG_CLASS : FSSIG_FUNC, ps, n, "any", 0};
    fsC_argbuf slots;
    fsC_argbuf_init(c, &slots, npos, nkw);
    int *pos_slot = slots.ps, *kw_slot = slots.ks;
    char *err = NULL;
    if (fsSig_bind(&sig, npos, kw, nkw, pos_slot, kw_slot, &err)) {
      fsC_report(c, FS_SEV_ERROR, "call", at, "%s", err ? err : "bad call");
      free(err);
      return -1;
    }
    for (size_t i = 0; i < npos; i++) { vals[pos_slot[i]] = pos[i]; got[pos_slot[i]] = 1; }
    for (size_t j = 0; j < nkw; j++) { vals[kw_slot[j]] = kwv[j]; got[kw_slot[j]] = 1; }
  }
  for (uint32_t i = 0; i < n; i++)
    if (!got[i]) vals[i] = fsC_kid(params->kids[i], 0) ? ev(c, params->kids[i]->kids[0]) : fsC_unknown();
  memset(f, 0, sizeof *f);
  f->fn = fn;
  c->frames[c->nframes++] = f;
  for (uint32_t i = 0; i < n; i++) fsC_setvar(c, params->kids[i]->str, vals[i]);
  return 0;
}

void fsC_leave(C *c, frame *f) {
  c->nframes--;
  map_free(c, &f->locals);
}

cv fsC_call_def(C *c, const fs_node *def, const fs_node *call, const cv *pos, size_t npos,
                const char *const *kw, const cv *kwv, size_t nkw) {
  frame f;
  if (c->spent || fsC_enter(c, &f, def, call, pos, npos, kw, kwv, nkw)) return fsC_unknown();
  uint32_t *at = def_slot(c, def);
  if (*at) { c->defs[*at - 1].called = 1; f.closure = c->defs[*at - 1].nested; }
  int dead0 = c->dead;
  c->dead = 0;
  block(c, def->kids[1]);
  c->dead = dead0;
  fsC_leave(c, &f);
  return f.has_ret ? f.ret : fsC_const(c, fsV_none());
}

/* ---- entry -------------------------------------------------------------- */

void fsC_options_init(fsC_options *o) {
  memset(o, 0, sizeof *o);
  fsF_machine_detect(&o->machine);
}

int fsC_parse_budget(fsC_options *o, const char *text, const char **err) {
  static const struct { const char *unit; size_t scale; } units[] = {
    {"", 1}, {"B", 1}, {"K", 1u << 10}, {"KiB", 1u << 10}, {"KB", 1000}, {"M", 1u << 20}, {"MiB", 1u << 20},
    {"MB", 1000000}, {"G", 1u << 30}, {"GiB", 1u << 30}, {"GB", 1000000000},
  };
  char *end;
  double secs = strtod(text, &end);
  *err = "--check-budget expects SECONDS[,BYTES]: a number of seconds > 0, then optionally a size "
         "(1GiB, 512MiB, 2G)";
  if (end == text || !(secs > 0) || secs > 1e6 || (*end && *end != ',')) return -1;
  size_t bytes = 0;
  if (*end == ',') {
    const char *b = end + 1;
    double n = strtod(b, &end);
    size_t i = 0;
    while (i < sizeof units / sizeof units[0] && strcmp(end, units[i].unit)) i++;
    if (end == b || i == sizeof units / sizeof units[0] || !(n * (double)units[i].scale >= 1 << 20) ||
        n * (double)units[i].scale > 1e15)
      return -1; /* at least 1 MiB: less cannot hold a script's tables */
    bytes = (size_t)(n * (double)units[i].scale);
  }
  o->budget_seconds = secs;
  o->budget_bytes = bytes;
  *err = NULL;
  return 0;
}

int fsC_parse_arg(fsC_options *o, const char *arg, const char *next, const char **err) {
  return fsF_parse_arg(&o->overrides, &o->machine, arg, next, err);
}

int fsC_check(const fs_source *src, const fs_node *ast, const fsC_options *o, fs_diags *d) {
  C c = {.src = src, .root = ast, .o = o, .d = d};
  double secs = o->budget_seconds > 0 ? o->budget_seconds : FSC_BUDGET_SECONDS;
  c.cpu_read_ns = now_ns();
  c.wall_read_ns = wall_ns();
  c.deadline_ns = c.cpu_read_ns + (uint64_t)(secs * 1e9);
  c.bytes_left = o->budget_bytes ? o->budget_bytes : FSC_BUDGET_BYTES;
  c.rank_mask = ~0u;
  size_t plen = src && src->path ? strlen(src->path) : 0;
  c.python = plen > 3 && !strcmp(src->path + plen - 3, ".py");
  GROW(&c, c.reasons, c.nreasons, c.capreasons);
  c.nreasons = 1; /* 0 is "no reason" */
  c.define_used = fsA_xrealloc(NULL, o->ndefines + 1);
  memset(c.define_used, 0, o->ndefines + 1);
  /* About one global per top-level statement: sized once, a big script's
   * table does not leave its smaller copies behind in the arena. */
  size_t cap = 16;
  while (ast && cap < 2 * (size_t)ast->nkids) cap *= 2;
  map_grow(&c, &c.globals, cap);
  fsC_runnable(&c, ast);
  block(&c, ast);
  /* defs never called: analysed once with unknown arguments */
  c.dead = 0;
  for (size_t i = 0; i < c.ndefs && !c.spent; i++) {
    /* Each def's tree was last read by the first pass, long out of the
     * cache: its node and its parameters are fetched ahead. */
    if (i + 2 < c.ndefs) __builtin_prefetch(c.defs[i + 2].def);
    if (i + 1 < c.ndefs) __builtin_prefetch(c.defs[i + 1].def->kids[0]);
    if (c.defs[i].called) continue;
    const fs_node *def = c.defs[i].def;
    size_t n = def->kids[0]->nkids;
    cv *args = fsC_alloc(&c, (n + 1) * sizeof *args);
    /* A Python entry point's parameters come from its command line
     * (jsonargparse's CLI(setup) calls it): given by -D, the def is taken
     * as run, and Fabric's rules apply to it. */
    int given = 0;
    for (size_t k = 0; k < n; k++)
      if (c.python && define_attr(&c, def->kids[0]->kids[k]->str, &args[k])) given = 1;
      else args[k] = fsC_unknown();
    c.uncalled = !given;
    fsC_call_def(&c, def, NULL, args, n, NULL, NULL, 0);
  }
  for (size_t i = 0; i < o->ndefines && !c.spent; i++) { /* a check cut short cannot tell */
    if (c.define_used[i]) continue;
    size_t k = strcspn(o->defines[i], "=");
    fsD_add(d, FS_SEV_WARNING, "param", NULL, (fs_loc){0, 0},
            c.python ? "-D %.*s is not used by any param() call or attribute of a value not known"
                     : "-D %.*s is not used by any param() call", (int)k, o->defines[i]);
  }
  for (size_t i = 0; i < c.nconsts; i++) fsV_release(c.consts[i]);
  if (c.arena) fsA_arena_free(c.arena);
  free(c.consts); free(c.slots); free(c.objs); free(c.cfgs); free(c.reasons); free(c.trail);
  free(c.stamp_s); free(c.pos_s); free(c.stamp_o); free(c.pos_o);
  map_free(&c, &c.globals); map_free(&c, &c.seen); map_free(&c, &c.sigs); map_free(&c, &c.ns_vals);
  map_free(&c, &c.free_names);
  for (int i = 0; i < 8; i++) while (c.nspare[i]) free(c.spare[i][--c.nspare[i]]);
  while (c.nspare_chg) free(c.spare_chg[--c.nspare_chg]);
  free(c.rows);
  table_free(c.reason_ids, c.capreason_ids * sizeof *c.reason_ids);
  table_free(c.ns_memo, c.capns_memo * sizeof *c.ns_memo);
  free(c.define_used); free(c.defs); free(c.defidx); free(c.feats);
  return c.nerrors;
}
