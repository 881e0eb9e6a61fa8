/* plan.c -- per-rank memory plan (see plan.h): bytes per rank from the
 * precision's element sizes, FSDP's units and the activation walk
 * (plan_act.c), the fit against a GPU and the smallest change that fits;
 * printed as text or JSON.  docs/distributed.md ("Memory plan") is the
 * user's side of the same formulas. */
#include "plan.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "comm.h"
#include "fsdp.h"

/* ---- precisions ---- */

static const struct {
  const char *name;
  fsPL_sizes sz;
} precisions[] = {
  /*                         param grad state low high autocast */
  {"32-true",              {4, 4, 4, 4, 4, false}},
  {"64-true",              {8, 8, 8, 8, 8, false}},
  {"bf16-true",            {2, 2, 2, 2, 2, false}},
  {"16-true",              {2, 2, 2, 2, 2, false}},
  {"bf16-mixed",           {4, 4, 4, 2, 4, true}},
  {"16-mixed",             {4, 4, 4, 2, 4, true}},
  /* Fabric's TransformerEnginePrecision keeps weights in bf16 / fp16 and
   * computes the matrix products in fp8 inside TE's layers: the -true layout */
  {"transformer-engine",   {2, 2, 2, 2, 2, false}},
  {"transformer-engine-float16", {2, 2, 2, 2, 2, false}},
};

int fsPL_precision_sizes(const char *precision, fsPL_sizes *out) {
  for (size_t i = 0; i < sizeof precisions / sizeof *precisions; i++)
    if (strcmp(precision, precisions[i].name) == 0) {
      *out = precisions[i].sz;
      return 0;
    }
  return -1;
}

bool fsPL_precision_runs(const char *precision, const char *accelerator, const char *strategy) {
  /* all but R70's (docs/runtime.md, Precision; connector.c fsF_precision_unsupported) */
  if (!strcmp(precision, "64-true")) /* one device or DDP, on the cpu or cuda (f64_kernels.h) */
    return strategy && (!strcmp(strategy, "SingleDeviceStrategy") || !strcmp(strategy, "DDPStrategy"));
  if (!strcmp(precision, "16-mixed"))
    return accelerator && !strcmp(accelerator, "cuda") && strategy && strcmp(strategy, "DeepSpeedStrategy") &&
           strcmp(strategy, "ModelParallelStrategy");
  return !strcmp(precision, "32-true") || !strcmp(precision, "bf16-mixed") || !strcmp(precision, "bf16-true") ||
         !strcmp(precision, "16-true");
}

/* ---- GPUs ---- */

#define GiB (1ull << 30)
/* Nominal memory as NVIDIA's datasheets give it (GB read as GiB, the way
 * `80GiB` is meant); nvidia-smi shows a little less: the driver keeps some. */
static const struct {
  const char *name;
  uint64_t bytes;
} gpus[] = {
  {"H100", 80 * GiB},       {"H100-80GB", 80 * GiB}, {"H100-NVL", 94 * GiB},
  {"H200", 141 * GiB},      {"B200", 180 * GiB},     {"GH200", 96 * GiB},
  {"A100", 80 * GiB},       {"A100-80GB", 80 * GiB}, {"A100-40GB", 40 * GiB},
  {"L40S", 48 * GiB},       {"L40", 48 * GiB},       {"L4", 24 * GiB},
  {"A10", 24 * GiB},        {"A10G", 24 * GiB},      {"A6000", 48 * GiB},
  {"V100", 16 * GiB},       {"V100-16GB", 16 * GiB}, {"V100-32GB", 32 * GiB},
  {"T4", 16 * GiB},         {"RTX4090", 24 * GiB},   {"RTX3090", 24 * GiB},
};

int fsPL_parse_gpu_memory(const char *text, fsPL_options *o) {
  for (size_t i = 0; i < sizeof gpus / sizeof *gpus; i++)
    if (strcasecmp(text, gpus[i].name) == 0) {
      o->gpu_bytes = gpus[i].bytes;
      snprintf(o->gpu_name, sizeof o->gpu_name, "%s", gpus[i].name);
      return 0;
    }
  static const struct { const char *unit; double scale; } units[] = {
    {"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"M", 1048576.0}, {"MiB", 1048576.0},
    {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9}, {"T", 1099511627776.0},
    {"TiB", 1099511627776.0}, {"TB", 1e12},
  };
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno || !(v > 0) || !isdigit((unsigned char)text[0])) return -1;
  while (*end == ' ') end++;
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (strcasecmp(end, units[i].unit) == 0) {
      double b = v * units[i].scale;
      if (b >= 1.8e19) return -1;
      o->gpu_bytes = (uint64_t)b;
      o->gpu_name[0] = 0;
      return 0;
    }
  return -1;
}

/* ---- bytes per rank ---- */

int fsPL_rank_bytes(const fsPL_input *in, int r, fsPL_rank *out) {
  (void)r; /* shards are padded to one size, batches are per rank: every rank holds the same */
  fsPL_sizes sz;
  memset(out, 0, sizeof *out);
  if (fsPL_precision_sizes(in->precision, &sz) < 0) {
    fsT_seterr("plan: no memory layout for precision %s", in->precision);
    return -1;
  }
  uint64_t n = (uint64_t)fsM_num_parameters(in->model), gathered_elems = 0;
  if (in->sharded) { /* the run's units (fsdp.h) */
    fsSH_layout L;
    if (fsSH_layout_of(in->model, in->policy, &L) < 0) return -1;
    n = 0;
    for (int u = 0; u < L.n; u++) n += fsCC_shard((size_t)L.numel[u], in->world);
    gathered_elems = (uint64_t)fsSH_layout_gathered(&L, in->world);
    fsSH_layout_free(&L);
  }
  /* autocast's low-precision weights: copies beside the float32 ones, or
   * FSDP's gather in the low type */
  int gathered = sz.autocast ? 2 * sz.act_low : sz.param + sz.grad;
  out->params = (uint64_t)sz.param * n + (sz.autocast && !in->sharded ? (uint64_t)sz.act_low * n : 0);
  out->grads = (uint64_t)sz.grad * n;
  out->optim = in->optimizer ? (uint64_t)sz.state * (uint64_t)in->states * n : 0;
  out->gathered = (uint64_t)gathered * gathered_elems;
  out->total = out->total_ckpt = out->params + out->grads + out->optim + out->gathered;
  if (in->in_rank > 0) {
    fsPL_acts a;
    char err[160];
    if (fsPL_activations(in->model, in->in_rank, in->in_shape, in->in_bytes, &sz, &a, err, sizeof err) == 0) {
      out->acts_known = true;
      out->acts = a.saved + a.transient;
      out->acts_ckpt = a.ckpt_saved + a.ckpt_unit + a.transient;
      out->total += out->acts;
      out->total_ckpt += out->acts_ckpt;
    }
  }
  return 0;
}

/* ---- the smallest change that fits ---- */

typedef struct change {
  char what[160];    /* in words, for the text */
  const char *kind;  /* for JSON: "fsdp", "activation_checkpointing", "more_nodes", ... */
  uint64_t total;    /* per rank, after the change */
} change;

static int largest_rank_total(const fsPL_input *in, bool ckpt, uint64_t *total, bool *acts_known) {
  fsPL_rank b;
  if (fsPL_rank_bytes(in, 0, &b) < 0) return -1;
  *total = ckpt ? b.total_ckpt : b.total;
  if (acts_known) *acts_known = b.acts_known;
  return 0;
}

/* The changes in the order of how little they change the training: the
 * same computation sharded (FSDP on the same ranks), recomputation
 * (activation checkpointing), the same computation on more nodes, then
 * changes of the numbers (bf16-true, a smaller batch).  The first that fits
 * alone; if none does, all of them together with the fewest nodes that fit.
 * 1: *c filled; 0: nothing fits; -1 + fsT_error. */
static int smallest_change(const fsPL_input *in, uint64_t cap, change *c) {
  fsPL_input t = *in;
  uint64_t total;
  bool acts;
  t.sharded = true;
  if (!in->sharded && in->world > 1) {
    if (largest_rank_total(&t, false, &total, NULL) < 0) return -1;
    if (total <= cap) {
      *c = (change){.kind = "fsdp", .total = total};
      snprintf(c->what, sizeof c->what, "strategy=\"fsdp\" instead of \"%s\" on the same %d ranks", in->strategy, in->world);
      return 1;
    }
  }
  if (largest_rank_total(&t, true, &total, &acts) < 0) return -1;
  if (acts && total <= cap) {
    *c = (change){.kind = "activation_checkpointing", .total = total};
    snprintf(c->what, sizeof c->what, "%sactivation checkpointing of every unit "
             "(FSDPStrategy(activation_checkpointing_policy={...}))", in->sharded ? "" : "FSDP with ");
    return 1;
  }
  const int max_nodes = 4096;
  for (int nodes = in->num_nodes + 1; nodes <= max_nodes; nodes = nodes < 64 ? nodes + 1 : nodes * 2) {
    t.num_nodes = nodes;
    t.world = nodes * in->devices;
    if (largest_rank_total(&t, false, &total, NULL) < 0) return -1;
    if (total <= cap) {
      *c = (change){.kind = "more_nodes", .total = total};
      snprintf(c->what, sizeof c->what, "FSDP on %d nodes x %d devices (%d ranks)", nodes, in->devices, t.world);
      return 1;
    }
  }
  t = *in;
  fsPL_sizes sz = {0};
  if (fsPL_precision_sizes(in->precision, &sz) == 0 && sz.param > 2) {
    t.precision = "bf16-true";
    if (largest_rank_total(&t, false, &total, NULL) < 0) return -1;
    if (total <= cap) {
      *c = (change){.kind = "precision", .total = total};
      snprintf(c->what, sizeof c->what, "precision=\"bf16-true\" instead of \"%s\"", in->precision);
      return 1;
    }
  }
  t = *in;
  if (in->in_rank > 0 && in->in_shape[0] > 1) { /* activations grow with the batch: bisect */
    int64_t lo = 0, hi = in->in_shape[0];
    while (hi - lo > 1) {
      t.in_shape[0] = lo + (hi - lo) / 2;
      if (largest_rank_total(&t, false, &total, NULL) < 0) return -1;
      if (total <= cap) lo = t.in_shape[0];
      else hi = t.in_shape[0];
    }
    t.in_shape[0] = lo;
    if (lo > 0 && largest_rank_total(&t, false, &total, NULL) == 0) {
      *c = (change){.kind = "batch_size", .total = total};
      snprintf(c->what, sizeof c->what, "batch size %lld per rank instead of %lld", (long long)lo,
               (long long)in->in_shape[0]);
      return 1;
    }
  }
  /* together: FSDP, checkpointing, bf16-true, and the fewest nodes */
  t = *in;
  t.sharded = true;
  if (sz.param > 2) t.precision = "bf16-true";
  for (int nodes = in->num_nodes; nodes <= max_nodes; nodes = nodes < 64 ? nodes + 1 : nodes * 2) {
    t.num_nodes = nodes;
    t.world = nodes * in->devices;
    if (largest_rank_total(&t, true, &total, NULL) < 0) return -1;
    if (total <= cap) {
      *c = (change){.kind = "combined", .total = total};
      snprintf(c->what, sizeof c->what, "no one change is enough: FSDP with activation checkpointing%s on %d nodes x %d devices",
               t.precision != in->precision ? ", bf16-true," : "", nodes, in->devices);
      return 1;
    }
  }
  return 0;
}

/* ---- printing ---- */

static void human(char *buf, size_t n, uint64_t bytes) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  if (u) snprintf(buf, n, "%.1f %s", v, unit[u]);
  else snprintf(buf, n, "%llu B", (unsigned long long)bytes);
}

/* Ranks whose bytes are the same share one line: "0-3", "0,2". */
typedef struct layout {
  fsPL_rank b;
  int first, last, count;
} layout;

static bool same(const fsPL_rank *a, const fsPL_rank *b) {
  return a->params == b->params && a->grads == b->grads && a->optim == b->optim && a->gathered == b->gathered &&
         a->acts == b->acts && a->acts_ckpt == b->acts_ckpt && a->acts_known == b->acts_known;
}

/* One layout per run of equal consecutive ranks. */
static int layouts(const fsPL_input *in, layout **out) {
  layout *l = malloc((size_t)in->world * sizeof *l);
  int n = 0;
  if (!l) {
    fsT_seterr("out of memory");
    return -1;
  }
  for (int r = 0; r < in->world; r++) {
    fsPL_rank b;
    if (fsPL_rank_bytes(in, r, &b) < 0) {
      free(l);
      return -1;
    }
    if (n && same(&l[n - 1].b, &b)) l[n - 1].last = r, l[n - 1].count++;
    else l[n++] = (layout){b, r, r, 1};
  }
  *out = l;
  return n;
}

static void ranks_label(char *buf, size_t n, const layout *l) {
  if (l->first == l->last) snprintf(buf, n, "%d", l->first);
  else snprintf(buf, n, "%d-%d", l->first, l->last);
}

static void print_shape(FILE *out, const fsPL_input *in, bool json) {
  fputc('[', out);
  for (int i = 0; i < in->in_rank; i++) fprintf(out, i ? ", %lld" : "%lld", (long long)in->in_shape[i]);
  fputc(']', out);
  (void)json;
}

static void json_str(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fprintf(out, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) fprintf(out, "\\u%04x", *s);
    else fputc(*s, out);
  }
  fputc('"', out);
}

static void json_rank(FILE *out, const fsPL_rank *b) {
  fprintf(out, "\"parameters\": %llu, \"gradients\": %llu, \"optimizer\": %llu, \"gathered_unit\": %llu, ",
          (unsigned long long)b->params, (unsigned long long)b->grads, (unsigned long long)b->optim,
          (unsigned long long)b->gathered);
  if (b->acts_known)
    fprintf(out, "\"activations\": %llu, \"activations_checkpointed\": %llu, ", (unsigned long long)b->acts,
            (unsigned long long)b->acts_ckpt);
  else
    fputs("\"activations\": null, \"activations_checkpointed\": null, ", out);
  fprintf(out, "\"total\": %llu, \"total_checkpointed\": %llu", (unsigned long long)b->total,
          (unsigned long long)b->total_ckpt);
}

static void sum_into(fsPL_rank *t, const fsPL_rank *b, int k) {
  uint64_t m = (uint64_t)k;
  t->params += m * b->params, t->grads += m * b->grads, t->optim += m * b->optim;
  t->gathered += m * b->gathered, t->acts += m * b->acts, t->acts_ckpt += m * b->acts_ckpt;
  t->total += m * b->total, t->total_ckpt += m * b->total_ckpt;
  t->acts_known = b->acts_known;
}

int fsPL_print(FILE *out, const fsPL_input *in, const fsPL_options *o) {
  layout *l;
  int nl = layouts(in, &l);
  if (nl < 0) return -1;
  fsPL_rank sum = {0};
  uint64_t worst = 0;
  for (int i = 0; i < nl; i++) {
    sum_into(&sum, &l[i].b, l[i].count);
    if (l[i].b.total > worst) worst = l[i].b.total;
  }
  bool runs = fsPL_precision_runs(in->precision, in->accelerator, in->strategy), acts = l[0].b.acts_known;
  change c = {0};
  int fit = -1; /* -1: not asked, 1 fits, 0 does not */
  int found = 0;
  if (o && o->gpu_bytes) {
    fit = worst <= o->gpu_bytes;
    if (!fit && (found = smallest_change(in, o->gpu_bytes, &c)) < 0) {
      free(l);
      return -1;
    }
  }
  char gpu[96] = "";
  if (fit >= 0) {
    char h[32];
    human(h, sizeof h, o->gpu_bytes);
    snprintf(gpu, sizeof gpu, o->gpu_name[0] ? "%s (%s)" : "%s%s", o->gpu_name[0] ? o->gpu_name : "", h);
  }
  if (o && o->format == FSPL_JSON) {
    fputs("{\"plan\": {\"strategy\": ", out);
    json_str(out, in->strategy);
    fputs(", \"accelerator\": ", out);
    json_str(out, in->accelerator);
    fprintf(out, ", \"ranks\": %d, \"num_nodes\": %d, \"devices\": %d, \"precision\": ", in->world,
            in->num_nodes, in->devices);
    json_str(out, in->precision);
    fprintf(out, ", \"runs_today\": %s, \"model\": ", runs ? "true" : "false");
    json_str(out, in->model_class);
    fprintf(out, ", \"parameters\": %lld, \"optimizer\": ", (long long)fsM_num_parameters(in->model));
    if (in->optimizer) json_str(out, in->optimizer);
    else fputs("null", out);
    fprintf(out, ", \"optimizer_states\": %d, \"input\": ", in->states);
    if (in->in_rank) {
      fputs("{\"shape\": ", out);
      print_shape(out, in, true);
      fputs(", \"source\": ", out);
      json_str(out, in->in_source);
      fputs("}", out);
    } else {
      fputs("null", out);
    }
    fputs(", \"layouts\": [", out);
    for (int i = 0; i < nl; i++) {
      fprintf(out, "%s{\"first_rank\": %d, \"last_rank\": %d, ", i ? ", " : "", l[i].first, l[i].last);
      json_rank(out, &l[i].b);
      fputs("}", out);
    }
    fputs("], \"all_ranks\": {", out);
    json_rank(out, &sum);
    fputs("}", out);
    if (fit >= 0) {
      fprintf(out, ", \"gpu\": {\"name\": ");
      if (o->gpu_name[0]) json_str(out, o->gpu_name);
      else fputs("null", out);
      fprintf(out, ", \"bytes\": %llu, \"fits\": %s, \"change\": ", (unsigned long long)o->gpu_bytes,
              fit ? "true" : "false");
      if (found) {
        fputs("{\"kind\": ", out);
        json_str(out, c.kind);
        fputs(", \"description\": ", out);
        json_str(out, c.what);
        fprintf(out, ", \"total_per_rank\": %llu}", (unsigned long long)c.total);
      } else {
        fputs("null", out);
      }
      fputs("}", out);
    }
    fputs("}}\n", out);
    free(l);
    return 0;
  }
  fprintf(out, "plan: %s on %s, %d rank%s (%d node%s x %d device%s), precision %s, %s with %lld parameters, optimizer %s\n",
          in->strategy, in->accelerator, in->world, in->world == 1 ? "" : "s", in->num_nodes,
          in->num_nodes == 1 ? "" : "s", in->devices, in->devices == 1 ? "" : "s", in->precision,
          in->model_class, (long long)fsM_num_parameters(in->model), in->optimizer ? in->optimizer : "none");
  if (in->in_rank) {
    fputs("input: ", out);
    print_shape(out, in, false);
    fprintf(out, " per rank, from %s\n", in->in_source);
  } else {
    fputs("input: unknown (the script calls no model); give --batch-size (and --context) for activations\n", out);
  }
  fprintf(out, "%-8s %12s %12s %12s %14s %12s %12s\n", "ranks", "parameters", "gradients", "optimizer",
          "gathered unit", "activations", "total");
  for (int i = 0; i <= nl; i++) {
    const fsPL_rank *b = i < nl ? &l[i].b : &sum;
    char label[32], h[6][32];
    if (i < nl) ranks_label(label, sizeof label, &l[i]);
    else snprintf(label, sizeof label, "all");
    if (i == nl && in->world == 1) break; /* one rank: its line is the total */
    human(h[0], 32, b->params);
    human(h[1], 32, b->grads);
    human(h[2], 32, b->optim);
    human(h[3], 32, b->gathered);
    if (acts) human(h[4], 32, b->acts);
    else snprintf(h[4], 32, "?");
    human(h[5], 32, b->total);
    fprintf(out, "%-8s %12s %12s %12s %14s %12s %12s\n", label, h[0], h[1], h[2], h[3], h[4], h[5]);
  }
  if (acts) {
    char a[32], t[32];
    human(a, sizeof a, l[0].b.acts_ckpt);
    human(t, sizeof t, l[0].b.total_ckpt);
    fprintf(out, "with activation checkpointing of every unit: activations %s, total %s per rank "
            "(a prediction: the runtime does not checkpoint yet)\n", a, t);
  }
  if (!runs)
    fprintf(out, "note: %s is a prediction of torch's layout: this runtime does not run it (R70)\n", in->precision);
  else if (strcmp(in->precision, "32-true") && strcmp(in->precision, "64-true")) /* 64-true computes in double */
    fprintf(out, "note: %s is torch's layout; this runtime computes on float32 copies of low-precision tensors, "
            "so its own peak is higher\n", in->precision);
  if (fit >= 0) {
    char w[32], t[32];
    human(w, sizeof w, worst);
    if (fit) {
      fprintf(out, "fits in %s: %s per rank%s\n", gpu, w, acts ? "" : " (activations not counted)");
    } else {
      fprintf(out, "does not fit in %s: %s per rank%s\n", gpu, w, acts ? "" : " (activations not counted)");
      if (found) {
        human(t, sizeof t, c.total);
        fprintf(out, "smallest change that fits: %s (%s per rank)\n", c.what, t);
      } else {
        fprintf(out, "no change tried fits (FSDP, activation checkpointing, bf16-true, up to 4096 nodes, a smaller batch)\n");
      }
    }
  }
  free(l);
  return 0;
}
