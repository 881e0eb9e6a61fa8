/* connector.c -- Fabric(...)'s arguments resolved as Lightning's
 * _Connector does: accelerator, strategy, devices, num_nodes and precision,
 * with its errors and warnings, against a machine (this one, or the one the
 * script declares) and the command line's overrides, as `fabric run` gives
 * them.  The result, fsF_config, is what every rule in fabric.c reads. */
#include "fabric_int.h"
#include "value.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ------------------------------------------------------------- */

const char *fsF_cls_name(fsF_cls c) {
  static const char *const names[FSF_CLS__COUNT] = {
    "SingleDeviceStrategy", "DataParallelStrategy", "DDPStrategy", "FSDPStrategy",
    "DeepSpeedStrategy", "ModelParallelStrategy", "XLAStrategy",
    "SingleDeviceXLAStrategy", "XLAFSDPStrategy",
  };
  return names[c];
}

static const char *const prec_names[] = {
  "32-true", "16-true", "bf16-true", "16-mixed", "bf16-mixed", "64-true",
  "transformer-engine", "transformer-engine-float16",
};

const char *fsF_prec_name(fsF_prec p) { return prec_names[p]; }

const char *fsF_precision_unsupported(const fsF_config *cfg) {
  switch (cfg->precision) {
  case FSF_P64: /* float64 kernels on the cpu and cuda (f64_kernels.h); DDP all-reduces float64 */
    if (cfg->cls == FSF_SINGLE || cfg->cls == FSF_DDP) return NULL;
    return "precision=\"64-true\" runs on one device or under DDP: this runtime has no float64 path for "
           "DataParallel, sharded or model-parallel strategies; use strategy=\"ddp\" or precision=\"32-true\"";
  case FSF_P16_MIXED:
    /* off CUDA that leaves MPS (on CPU it became bf16-mixed, W8; FSDP and
     * DeepSpeed need a GPU, R10 and R21); ModelParallel refused it (R12).
     * DeepSpeed's engine scales the loss itself (its fp16 config), an
     * engine this runtime does not have. */
    if (cfg->accel == FSF_CUDA && cfg->cls != FSF_DEEPSPEED) return NULL;
    if (cfg->cls == FSF_DEEPSPEED)
      return "precision=\"16-mixed\" under DeepSpeed is DeepSpeed's engine: the module in float16 and the "
             "engine's own dynamic loss scaling (its fp16 config), which this runtime does not run; "
             "strategy=\"fsdp\" runs 16-mixed sharded";
    return "precision=\"16-mixed\" runs on CUDA only (one device, DDP or FSDP), where Fabric runs float16 "
           "autocast with a gradient scaler; use accelerator=\"cuda\" or precision=\"bf16-mixed\"";
  case FSF_PTE:
  case FSF_PTE16:
    return "this runtime does not run NVIDIA Transformer Engine's layers; use precision=\"bf16-mixed\"";
  default: return NULL;
  }
}

int fsF_check_precision_runs(const fsF_config *cfg, fsF_issues *iss) {
  const char *why = fsF_precision_unsupported(cfg);
  return why ? fsF_fail(iss, "R70", "pick a precision this runtime runs: 32-true, bf16-mixed, bf16-true, 16-true (16-mixed on CUDA, not under DeepSpeed; 64-true on one device or DDP)",
                        "%s", why)
             : 0;
}

static const char *const accel_names[] = {"cpu", "cuda", "mps", "tpu"};
const char *const fsF_accel_classes[] = {
  "CPUAccelerator", "CUDAAccelerator", "MPSAccelerator", "XLAAccelerator"};

const char *fsF_accel_name(fsF_accel a) { return accel_names[a]; }

/* STRATEGY_REGISTRY in registration order, with what each name resolves to. */
static const struct {
  const char *name; fsF_cls cls; fsF_start start; int stage, offload;
} registry[] = {
  {"ddp", FSF_DDP, FSF_START_POPEN, 0, 0},
  {"ddp_spawn", FSF_DDP, FSF_START_SPAWN, 0, 0},
  {"ddp_fork", FSF_DDP, FSF_START_FORK, 0, 0},
  {"ddp_notebook", FSF_DDP, FSF_START_FORK, 0, 0},
  {"ddp_find_unused_parameters_true", FSF_DDP, FSF_START_POPEN, 0, 0},
  {"dp", FSF_DP, FSF_START_POPEN, 0, 0},
  {"deepspeed", FSF_DEEPSPEED, FSF_START_POPEN, 2, 0},
  {"deepspeed_stage_1", FSF_DEEPSPEED, FSF_START_POPEN, 1, 0},
  {"deepspeed_stage_1_offload", FSF_DEEPSPEED, FSF_START_POPEN, 1, 1},
  {"deepspeed_stage_2", FSF_DEEPSPEED, FSF_START_POPEN, 2, 0},
  {"deepspeed_stage_2_offload", FSF_DEEPSPEED, FSF_START_POPEN, 2, 1},
  {"deepspeed_stage_3", FSF_DEEPSPEED, FSF_START_POPEN, 3, 0},
  {"deepspeed_stage_3_offload", FSF_DEEPSPEED, FSF_START_POPEN, 3, 1},
  {"deepspeed_stage_3_offload_nvme", FSF_DEEPSPEED, FSF_START_POPEN, 3, 1},
  {"fsdp", FSF_FSDP, FSF_START_POPEN, 0, 0},
  {"fsdp_cpu_offload", FSF_FSDP, FSF_START_POPEN, 0, 1},
  {"single_xla", FSF_SINGLE_XLA, FSF_START_POPEN, 0, 0},
  {"xla", FSF_XLA, FSF_START_POPEN, 0, 0},
  {"xla_fsdp", FSF_XLA_FSDP, FSF_START_POPEN, 0, 0},
};
#define NREGISTRY (sizeof registry / sizeof registry[0])

static int registry_find(const char *name) {
  for (size_t i = 0; i < NREGISTRY; i++)
    if (!strcmp(registry[i].name, name)) return (int)i;
  return -1;
}

/* ---- machine and command line ------------------------------------------ */

void fsF_machine_detect(fsF_machine *m) {
  memset(m, 0, sizeof *m);
  m->has_fork = 1;
  int n = 0;
  DIR *d = opendir("/proc/driver/nvidia/gpus");
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) if (e->d_name[0] != '.') n++;
    closedir(d);
  }
  const char *vis = getenv("CUDA_VISIBLE_DEVICES");
  if (vis) {
    /* CUDA takes the list up to its first invalid entry. */
    int k = 0;
    for (const char *p = vis; *p && k < n;) {
      while (*p == ' ') p++;
      char *end;
      long id = strtol(p, &end, 10);
      if (end != p ? (id < 0 || id >= n) : strncmp(p, "GPU-", 4) && strncmp(p, "MIG-", 4)) break;
      k++;
      p = strchr(p, ',');
      if (!p) break;
      p++;
    }
    n = k;
  }
  m->cuda_gpus = n > FSF_MAX_GPUS ? FSF_MAX_GPUS : n;
  const char *cli = getenv("LT_CLI_USED");
  m->under_cli = cli && !strcmp(cli, "1");
}

int fsF_parse_arg(fsF_overrides *o, fsF_machine *m, const char *arg,
                  const char *next, const char **err) {
  static const struct { const char *opt; size_t off; } fabric_opts[] = {
    {"--accelerator", offsetof(fsF_overrides, accelerator)},
    {"--strategy", offsetof(fsF_overrides, strategy)},
    {"--devices", offsetof(fsF_overrides, devices)},
    {"--num-nodes", offsetof(fsF_overrides, num_nodes)},
    {"--precision", offsetof(fsF_overrides, precision)},
    {"--gpus", 0}, {"--assume", 0},
  };
  for (size_t i = 0; i < sizeof fabric_opts / sizeof fabric_opts[0]; i++) {
    size_t l = strlen(fabric_opts[i].opt);
    if (strncmp(arg, fabric_opts[i].opt, l) || (arg[l] && arg[l] != '=')) continue;
    const char *val = arg[l] == '=' ? arg + l + 1 : next;
    int used = arg[l] == '=' ? 1 : 2;
    if (!val) { *err = "option needs a value"; return -1; }
    if (!strcmp(fabric_opts[i].opt, "--gpus")) {
      char *end;
      long n = strtol(val, &end, 10);
      if (end == val || *end || n < 0 || n > FSF_MAX_GPUS) { *err = "--gpus wants a number from 0 to 64"; return -1; }
      m->cuda_gpus = (int)n;
    } else if (!strcmp(fabric_opts[i].opt, "--assume")) {
      for (const char *p = val; *p;) {
        size_t k = strcspn(p, ",");
        if (k == 9 && !strncmp(p, "deepspeed", k)) m->deepspeed = 1;
        else if (k == 3 && !strncmp(p, "xla", k)) { m->xla = 1; if (!m->tpus) m->tpus = 8; }
        else if (k == 3 && !strncmp(p, "mps", k)) m->mps = 1;
        else if (k == 18 && !strncmp(p, "transformer-engine", k)) m->transformer_engine = 1;
        else if (k == 3 && !strncmp(p, "cli", k)) m->under_cli = 1;
        else if (k == 12 && !strncmp(p, "bitsandbytes", k)) m->bitsandbytes = 1;
        else if (k == 7 && !strncmp(p, "no-fork", k)) m->has_fork = 0;
        else { *err = "--assume takes deepspeed, xla, mps, transformer-engine, bitsandbytes, cli, no-fork"; return -1; }
        p += k;
        if (*p) p++;
      }
    } else {
      *(const char **)((char *)o + fabric_opts[i].off) = val;
    }
    return used;
  }
  return 0;
}

/* ---- pre-flight: the machine the script declares ----------------------- */

/* The value Fabric will see: the command line's when given (a conflict is
 * R68, which resolution reports), else the script's. */
static fsF_value effective(const fsF_value *v, const char *cli) {
  return cli ? (fsF_value){.kind = FSF_STR, .s = cli} : *v;
}

/* The CUDA devices `devices` names: N, the highest id + 1 of a list, at least 1. */
static int gpus_named(const fsF_value *v) {
  int64_t n = 1;
  if (v->kind == FSF_INT) n = v->i;
  else if (v->kind == FSF_INTLIST)
    for (size_t i = 0; i < v->nints; i++) n = v->ints[i] + 1 > n ? v->ints[i] + 1 : n;
  else if (v->kind == FSF_STR && strchr(v->s, ','))
    for (const char *p = v->s; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
      long id = strtol(p, NULL, 10);
      if (id + 1 > n) n = id + 1;
    }
  else if (v->kind == FSF_STR && isdigit((unsigned char)v->s[0])) n = strtol(v->s, NULL, 10);
  return n < 1 ? 1 : n > FSF_MAX_GPUS ? FSF_MAX_GPUS : (int)n;
}

int fsF_declared_machine(const fsF_args *args, const fsF_overrides *o, const fsF_machine *here,
                         fsF_machine *d, char **note) {
  static const fsF_overrides none = {0};
  if (!o) o = &none;
  fsF_value acc = effective(&args->accelerator, o->accelerator);
  fsF_value strat = effective(&args->strategy, o->strategy);
  fsF_value dev = effective(&args->devices, o->devices);
  fsF_value prec = effective(&args->precision, o->precision);
  const char *a = acc.kind == FSF_STR ? acc.s : "auto";
  int cls = -1;
  if (strat.kind == FSF_STRATEGY) cls = (int)strat.strategy.cls;
  else if (strat.kind == FSF_STR) {
    char low[64];
    size_t n = strlen(strat.s) < sizeof low - 1 ? strlen(strat.s) : sizeof low - 1;
    for (size_t i = 0; i < n; i++) low[i] = (char)tolower((unsigned char)strat.s[i]);
    low[n] = 0;
    int r = registry_find(low);
    if (r >= 0) cls = (int)registry[r].cls;
  }
  int xla = !strcmp(a, "tpu") || cls == FSF_XLA || cls == FSF_SINGLE_XLA || cls == FSF_XLA_FSDP;
  /* ModelParallelStrategy's mesh sizes given as ints with `devices` left to
   * auto name the world size, and Fabric's auto takes every GPU of a node:
   * the script declares the nodes' GPUs that make that size. */
  int mesh = 0;
  if (cls == FSF_MP && strat.kind == FSF_STRATEGY && strat.strategy.dp_given && strat.strategy.tp_given &&
      (dev.kind == FSF_UNSET || (dev.kind == FSF_STR && !strcmp(dev.s, "auto")))) {
    fsF_value nn = effective(&args->num_nodes, o->num_nodes);
    int64_t nodes = nn.kind == FSF_INT ? nn.i : nn.kind == FSF_STR ? strtol(nn.s, NULL, 10) : 1;
    int64_t world = (int64_t)strat.strategy.dp_size * strat.strategy.tp_size;
    if (nodes >= 1 && world > nodes && world % nodes == 0 && world / nodes <= FSF_MAX_GPUS) mesh = (int)(world / nodes);
  }
  /* FSDP and DeepSpeed run on CUDA only (R10, R21): with accelerator auto
   * they declare GPUs as cuda does; so does such a mesh */
  int cuda = !xla && (!strcmp(a, "cuda") || (!strcmp(a, "gpu") && !here->mps) ||
                      (!strcmp(a, "auto") && (cls == FSF_FSDP || cls == FSF_DEEPSPEED || mesh)));
  *d = *here;
  char what[4][64], had[4][64];
  int k = 0;
  int n = mesh ? mesh : gpus_named(&dev);
  if (cuda && n > here->cuda_gpus) {
    d->cuda_gpus = n;
    snprintf(what[k], sizeof what[0], "%d CUDA GPU%s", n, n == 1 ? "" : "s");
    if (here->cuda_gpus) snprintf(had[k], sizeof had[0], "%d CUDA GPU%s", here->cuda_gpus, here->cuda_gpus == 1 ? "" : "s");
    else snprintf(had[k], sizeof had[0], "no CUDA GPU");
    k++;
  }
  if (cls == FSF_DEEPSPEED && !here->deepspeed) {
    d->deepspeed = 1;
    snprintf(what[k], sizeof what[0], "DeepSpeed");
    snprintf(had[k++], sizeof had[0], "no DeepSpeed");
  }
  if (xla && !here->xla) {
    d->xla = 1;
    d->tpus = dev.kind == FSF_UNSET || (dev.kind == FSF_STR && !strcmp(dev.s, "auto")) ? 8 : gpus_named(&dev);
    snprintf(what[k], sizeof what[0], "XLA with %d TPU device%s", d->tpus, d->tpus == 1 ? "" : "s");
    snprintf(had[k++], sizeof had[0], "no XLA");
  }
  if (!strcmp(a, "mps") && !here->mps) {
    d->mps = 1;
    snprintf(what[k], sizeof what[0], "an MPS GPU");
    snprintf(had[k++], sizeof had[0], "no MPS");
  }
  if (prec.kind == FSF_STR && !strncmp(prec.s, "transformer-engine", 18) && !here->transformer_engine) {
    d->transformer_engine = 1;
    snprintf(what[k], sizeof what[0], "Transformer Engine");
    snprintf(had[k++], sizeof had[0], "no Transformer Engine");
  }
  if (k == 0) return 0;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "checked for ");
  for (int i = 0; i < k; i++) fsV_buf_printf(&b, "%s%s", i == 0 ? "" : i == k - 1 ? " and " : ", ", what[i]);
  fsV_buf_printf(&b, " as the script declares; this machine has ");
  if (k == 1 && here->cuda_gpus && d->cuda_gpus != here->cuda_gpus) fsV_buf_printf(&b, "only %d", here->cuda_gpus);
  else if (k == 1) fsV_buf_printf(&b, "none");
  else
    for (int i = 0; i < k; i++) fsV_buf_printf(&b, "%s%s", i == 0 ? "" : i == k - 1 ? " and " : ", ", had[i]);
  fsV_buf_printf(&b, " (--here checks for this machine)");
  *note = fsF_buf_take(&b);
  return 1;
}

/* ---- resolution -------------------------------------------------------- */

static const char *const H_R1 = "pick a registered strategy name, e.g. `Fabric(strategy=\"ddp\")`";
static const char *const H_R2 = "pick one of auto, cpu, cuda, gpu, mps, tpu (exact case), e.g. `Fabric(accelerator=\"cuda\")`";
static const char *const H_R3 = "use one of Fabric's precision names, e.g. `Fabric(precision=\"16-mixed\")`";
static const char *const H_NODES = "pass a positive integer, e.g. `Fabric(num_nodes=1)`";
static const char *const H_DEV = "ask for at least one device, e.g. `Fabric(devices=1)`";
static const char *const H_ACC = "use an accelerator this machine has (`accelerator=\"cpu\"`), or pass --gpus=N to check for a machine with N GPUs";

/* Python's int() of a value, as `int(num_nodes)` does. */
static int py_int(const fsF_value *v, int64_t *out, fsF_issues *iss) {
  switch (v->kind) {
  case FSF_INT: case FSF_BOOL: *out = v->i; return 0;
  case FSF_FLOAT:
    if (isnan(v->f)) return fsF_fail(iss, "R4", H_NODES, "cannot convert float NaN to integer");
    if (isinf(v->f)) return fsF_fail(iss, "R4", H_NODES, "cannot convert float infinity to integer");
    if (fabs(v->f) >= 9.2e18) return fsF_fail(iss, "R4", H_NODES, "Python int too large to convert to C int");
    *out = (int64_t)v->f; return 0;
  case FSF_STR: {
    const char *p = v->s;
    while (isspace((unsigned char)*p)) p++;
    char *end;
    long long x = strtoll(p, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (end == p || *end || !isdigit((unsigned char)p[*p == '-' || *p == '+'])) {
      char *r = fsF_repr_str(v->s);
      fsF_fail(iss, "R4", H_NODES, "invalid literal for int() with base 10: %s", r);
      free(r);
      return -1;
    }
    *out = x; return 0;
  }
  default: {
    const char *t = v->kind == FSF_NONE || v->kind == FSF_UNSET ? "NoneType"
                  : v->kind == FSF_STRATEGY ? fsF_cls_name(v->strategy.cls)
                  : v->kind == FSF_INTLIST || v->kind == FSF_LIST ? (v->tuple ? "tuple" : "list")
                  : v->tname ? v->tname : "object";
    return fsF_fail(iss, "R4", H_NODES,
                "int() argument must be a string, a bytes-like object or a real number, not '%s'", t);
  }
  }
}

/* R68: the CLI value replaces the argument; a different explicit value in
 * the script is a conflict. `str(current) != str(default)` as Fabric. */
static int from_cli(const char *name, fsF_value *v, const char *cli, const char *deflt,
                    fsF_issues *iss) {
  if (!cli) return 0;
  char *cur = fsF_value_str(v);
  int conflict = v->kind != FSF_UNSET && strcmp(cur, cli) && strcmp(cur, deflt);
  free(cur);
  if (conflict) {
    char *r = fsF_value_repr(v);
    fsF_fail(iss, "R68", "drop the value either from the command line or from `Fabric(...)`",
         "Your code has `Fabric(%s=%s, ...)` but it conflicts with the value `--%s=%s` set through the CLI.  Remove it either from the CLI or from the Lightning Fabric object.",
         name, r, name, cli);
    free(r);
    return -1;
  }
  *v = (fsF_value){.kind = FSF_STR, .s = cli};
  return 0;
}

/* The precision names Fabric accepts (R3), with what each converts to. */
static const struct { const char *name; int num; fsF_prec prec; int legacy; } precisions[] = {
  {"transformer-engine", 0, FSF_PTE, 0}, {"transformer-engine-float16", 0, FSF_PTE16, 0},
  {"16-true", 0, FSF_P16_TRUE, 0}, {"16-mixed", 0, FSF_P16_MIXED, 0},
  {"bf16-true", 0, FSF_PBF16_TRUE, 0}, {"bf16-mixed", 0, FSF_PBF16_MIXED, 0},
  {"32-true", 0, FSF_P32, 0}, {"64-true", 0, FSF_P64, 0},
  {"64", 64, FSF_P64, 0}, {"32", 32, FSF_P32, 0}, {"16", 16, FSF_P16_MIXED, 1},
  {"bf16", 0, FSF_PBF16_MIXED, 1},
};

/* R3 and the alias conversion (W9). *prec = -1 when the value passes R3 but
 * names no precision (16.0 == 16 becomes "16.0"); text holds str(precision). */
static int convert_precision(const fsF_value *v, int *prec, char **text, fsF_issues *iss) {
  int idx = -1;
  if (v->kind == FSF_UNSET || v->kind == FSF_NONE) { *prec = FSF_P32; *text = NULL; return 0; }
  for (size_t i = 0; i < sizeof precisions / sizeof precisions[0] && idx < 0; i++) {
    if (v->kind == FSF_STR && !strcmp(v->s, precisions[i].name)) idx = (int)i;
    if (precisions[i].num && ((v->kind == FSF_INT && v->i == precisions[i].num) ||
                              (v->kind == FSF_FLOAT && v->f == precisions[i].num))) idx = (int)i;
  }
  if (idx < 0) {
    char *r = fsF_value_repr(v);
    fsF_fail(iss, "R3", H_R3,
         "Precision %s is invalid. Allowed precision values: ('transformer-engine', 'transformer-engine-float16', '16-true', '16-mixed', 'bf16-true', 'bf16-mixed', '32-true', '64-true', 64, 32, 16, '64', '32', '16', 'bf16')",
         r);
    free(r);
    return -1;
  }
  *text = fsF_value_str(v);
  if (v->kind == FSF_FLOAT) { *prec = -1; return 0; }
  if (precisions[idx].legacy)
    fsF_warn(iss, "W9", "write the precision's full name",
         "`precision=%s` is supported for historical reasons but its usage is discouraged. Please set your precision to %s instead!",
         *text, prec_names[precisions[idx].prec]);
  *prec = (int)precisions[idx].prec;
  return 0;
}

/* "Did you mean" for the names R1, R2 and R3 refuse. */
const char *fsF_suggest_name(const char *param, const char *value) {
  const char *names[NREGISTRY + 16];
  size_t n = 0;
  if (!strcmp(param, "strategy")) {
    names[n++] = "auto";
    for (size_t i = 0; i < NREGISTRY; i++) names[n++] = registry[i].name;
  } else if (!strcmp(param, "accelerator")) {
    static const char *const acc[] = {"auto", "cpu", "cuda", "gpu", "mps", "tpu"};
    for (size_t i = 0; i < 6; i++) names[n++] = acc[i];
  } else if (!strcmp(param, "precision")) {
    for (size_t i = 0; i < sizeof precisions / sizeof precisions[0]; i++)
      if (!precisions[i].num) names[n++] = precisions[i].name;
  }
  return fsD_closest(value, names, n);
}

static void sb_int_list(fsV_buf *b, const int *ids, int n) {
  fsV_buf_printf(b, "[");
  for (int i = 0; i < n; i++) fsV_buf_printf(b, "%s%d", i ? ", " : "", ids[i]);
  fsV_buf_printf(b, "]");
}

/* _parse_gpu_ids: R9 against `avail` devices; fills cfg->device_ids. */
static int parse_gpu_ids(const fsF_value *v, int avail, fsF_config *cfg, fsF_issues *iss) {
  static const char *const H_R9 = "ask for devices this machine has, e.g. `devices=1`, or pass --gpus=N";
  static const char *const msg = "Device IDs (GPU/TPU) must be an int, a string, a sequence of ints, but you passed";
  int64_t buf[FSF_MAX_GPUS + 1];
  const int64_t *ids = buf;
  size_t n = 0;
  if (v->kind == FSF_LIST) return fsF_fail(iss, "R9", H_R9, "%s a sequence of %s.", msg, v->tname ? v->tname : "object");
  if (v->kind != FSF_INT && v->kind != FSF_STR && v->kind != FSF_INTLIST) {
    char *r = fsF_value_repr(v);
    fsF_fail(iss, "R9", H_R9, "%s %s.", msg, r);
    free(r);
    return -1;
  }
  if (v->kind == FSF_INTLIST) {
    ids = v->ints; n = v->nints;
  } else if (v->kind == FSF_STR && strcmp(v->s, "-1") && strchr(v->s, ',')) {
    for (const char *p = v->s; *p;) {
      size_t k = strcspn(p, ",");
      if (k) {
        char part[64];
        snprintf(part, sizeof part, "%.*s", (int)(k < 63 ? k : 63), p);
        fsF_value pv = {.kind = FSF_STR, .s = part};
        int64_t x;
        if (py_int(&pv, &x, iss)) { iss->items[iss->n - 1].rule = "R9"; return -1; }
        if (n == FSF_MAX_GPUS + 1) break;
        buf[n++] = x;
      }
      p += k;
      if (*p) p++;
    }
  } else {
    int64_t k;
    if (v->kind == FSF_STR) {
      if (py_int(v, &k, iss)) { iss->items[iss->n - 1].rule = "R9"; return -1; }
    } else k = v->i;
    if (k == -1) k = avail;
    for (int64_t i = 0; i < k && n <= FSF_MAX_GPUS; i++) buf[n++] = i;
  }
  if (n == 0) return fsF_fail(iss, "R9", H_R9, "GPUs requested but none are available.");
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < i; j++)
      if (ids[i] == ids[j]) return fsF_fail(iss, "R9", H_R9, "Device ID's (GPU) must be unique.");
  for (size_t i = 0; i < n; i++) {
    if (ids[i] >= 0 && ids[i] < avail && n <= FSF_MAX_GPUS) continue;
    fsV_buf b = {0};
    fsV_buf_printf(&b, "[");
    for (size_t j = 0; j < n; j++) fsV_buf_printf(&b, "%s%lld", j ? ", " : "", (long long)ids[j]);
    fsV_buf_printf(&b, "]");
    int all[FSF_MAX_GPUS];
    for (int j = 0; j < avail; j++) all[j] = j;
    fsV_buf a = {0};
    sb_int_list(&a, all, avail);
    char *req = fsF_buf_take(&b), *have = fsF_buf_take(&a);
    fsF_fail(iss, "R9", H_R9, "You requested gpu: %s\n But your machine only has: %s", req, have);
    free(req); free(have);
    return -1;
  }
  cfg->devices = (int)n;
  for (size_t i = 0; i < n; i++) cfg->device_ids[i] = (int)ids[i];
  return 0;
}

static int parse_devices(const fsF_value *v, const fsF_machine *m, fsF_config *cfg, fsF_issues *iss) {
  int is_auto = v->kind == FSF_UNSET || (v->kind == FSF_STR && !strcmp(v->s, "auto"));
  if (cfg->accel == FSF_CPU) {
    int64_t k = 0;
    if (is_auto) k = 1;
    else if (v->kind == FSF_INT || v->kind == FSF_BOOL) k = v->i;
    else if (v->kind == FSF_STR) {
      const char *p = v->s, *e = p + strlen(p);
      while (isspace((unsigned char)*p)) p++;
      while (e > p && isspace((unsigned char)e[-1])) e--;
      int digits = e > p;
      for (const char *q = p; q < e; q++) digits &= isdigit((unsigned char)*q) != 0;
      if (digits) k = strtoll(p, NULL, 10);
    }
    if (k <= 0 || k > 1 << 20)
      return fsF_fail(iss, "R8", "ask for a positive number of CPU processes, e.g. `devices=2`",
                  "`devices` selected with `CPUAccelerator` should be an int > 0.");
    cfg->devices = (int)k;
    for (int i = 0; i < FSF_MAX_GPUS; i++) cfg->device_ids[i] = i;
    return 0;
  }
  int avail = cfg->accel == FSF_CUDA ? m->cuda_gpus : cfg->accel == FSF_TPU ? m->tpus : 1;
  if (is_auto) {
    fsF_value all = {.kind = FSF_INT, .i = avail};
    return parse_gpu_ids(&all, avail, cfg, iss);
  }
  return parse_gpu_ids(v, avail, cfg, iss);
}

/* ---- raisesA: connector.py's flag checks (_check_config_and_set_final_flags)
 * that come after the strategy and accelerator names (R71-R73) ---- */

/* R71: with MPS available, an MPS-ish accelerator flag (mps, auto, gpu) and a
 * parallel strategy: an object (every strategy class a script can build is a
 * ParallelStrategy) or a name containing "ddp", "dp" or "deepspeed". */
static int mps_with_parallel_strategy(const fsF_value *strategy, const char *acc, const fsF_machine *m,
                                      fsF_issues *iss) {
  if (!m->mps || (strcmp(acc, "mps") && strcmp(acc, "auto") && strcmp(acc, "gpu"))) return 0;
  char *text = NULL;
  if (strategy->kind == FSF_STRATEGY) {
    text = fsF_value_str(strategy);
  } else if (strategy->kind == FSF_STR) {
    size_t n = strlen(strategy->s);
    text = fsA_xrealloc(NULL, n + 1);
    for (size_t i = 0; i <= n; i++) text[i] = (char)tolower((unsigned char)strategy->s[i]);
    if (!strstr(text, "dp") && !strstr(text, "deepspeed")) { /* "ddp" contains "dp" */
      free(text);
      return 0;
    }
  } else {
    return 0;
  }
  fsF_fail(iss, "R71", "set `accelerator=\"cpu\"` for several processes, or use the default strategy on MPS",
           "You set `strategy=%s` but strategies from the DDP family are not supported on the MPS accelerator. Either explicitly set `accelerator='cpu'` or change the strategy.",
           text ? text : "?");
  free(text);
  return -1;
}

/* R72: a plugin Fabric looks at that is not a plugin object is of an
 * invalid type.  R73: a strategy object's own `accelerator=` with an
 * accelerator flag; with the flag at auto, the strategy's becomes the flag. */
static int plugin_or_strategy_flags(const fsF_args *a, const char *precision_input, const char **acc,
                                    fsF_issues *iss) {
  if (a->plugin.kind != FSF_UNSET) {
    char *text = fsF_value_str(&a->plugin);
    fsF_fail(iss, "R72", "drop `plugins=`: select the precision with `precision=`",
             "Found invalid type for plugin %s. Expected one of: Precision, CheckpointIO, ClusterEnvironment.",
             text ? text : "?");
    free(text);
    return -1;
  }
  /* R78: a plugin type given twice, named in the order Fabric's Counter
   * met them; R79: the precision given by name, as Fabric unified it */
  static const char *const type_names[FSF_PT__COUNT] = {"Precision", "CheckpointIO", "ClusterEnvironment"};
  fsV_buf dup = {0};
  for (int pos = 1; pos <= FSF_PT__COUNT; pos++)
    for (int t = 0; t < FSF_PT__COUNT; t++)
      if (a->plugin_first[t] && a->plugin_first[t] == pos && a->plugin_count[t] > 1)
        fsV_buf_printf(&dup, "%s%s", dup.n ? ", " : "", type_names[t]);
  if (dup.n) {
    char *names = fsF_buf_take(&dup);
    fsF_fail(iss, "R78", "pass at most one plugin of each type in `plugins=`",
             "Received multiple values for %s flags in `plugins`. Expected one value for each type at most.",
             names ? names : "?");
    free(names);
    return -1;
  }
  free(dup.s);
  if (a->plugin_count[FSF_PT_PRECISION] && precision_input) {
    char *plugin = fsF_plugin_str((fsF_plugin)a->precision_plugin);
    fsF_fail(iss, "R79", "choose the precision once: drop `precision=` or the precision plugin",
             "Received both `precision=%s` and `plugins=%s`. Choose one.", precision_input, plugin ? plugin : "?");
    free(plugin);
    return -1;
  }
  if (a->strategy.kind != FSF_STRATEGY) return 0;
  const fsF_strategy_obj *obj = &a->strategy.strategy;
  if (obj->accelerator) {
    if (strcmp(*acc, "auto"))
      return fsF_fail(iss, "R73", "pass the accelerator once: either to the strategy or to `Fabric(accelerator=...)`",
                      "accelerator set through both strategy class and accelerator flag, choose one");
    static const char *const names[] = {"cpu", "cuda", "mps", "tpu", "gpu"};
    int k = obj->accelerator - 1;
    if (k >= 0 && k < 5) *acc = names[k];
  }
  /* R81-R83 (raisesD): the strategy's own precision plugin and devices */
  if (obj->precision && a->plugin_count[FSF_PT_PRECISION])
    return fsF_fail(iss, "R81", "pass the precision plugin once: to the strategy or in `plugins=`",
                    "precision set through both strategy class and plugins, choose one");
  if (obj->checkpoint_io && a->plugin_count[FSF_PT_CHECKPOINT_IO])
    return fsF_fail(iss, "R85", "pass the CheckpointIO plugin once: to the strategy or in `plugins=`",
                    "checkpoint_io set through both strategy class and plugins, choose one");
  if (obj->cluster_environment && a->plugin_count[FSF_PT_CLUSTER_ENV])
    return fsF_fail(iss, "R86", "pass the ClusterEnvironment plugin once: to the strategy or in `plugins=`",
                    "cluster_environment set through both strategy class and plugins, choose one");
  if (obj->parallel_devices == FSF_PD_CPU) {
    if (strcmp(*acc, "auto") && strcmp(*acc, "cpu"))
      return fsF_fail(iss, "R82", "pass CUDA devices to the strategy, or drop `accelerator=`",
                      "CPU parallel_devices set through %s class, but accelerator set to %s, please choose one device type",
                      fsF_cls_name(obj->cls), *acc);
    *acc = "cpu";
  } else if (obj->parallel_devices == FSF_PD_CUDA) {
    if (strcmp(*acc, "auto") && strcmp(*acc, "cuda") && strcmp(*acc, "gpu"))
      return fsF_fail(iss, "R83", "pass CPU devices to the strategy, or drop `accelerator=`",
                      "GPU parallel_devices set through %s class, but accelerator set to %s, please choose one device type",
                      fsF_cls_name(obj->cls), *acc);
    *acc = "cuda";
  }
  return 0;
}

int fsF_resolve(const fsF_args *args, const fsF_overrides *o, const fsF_machine *m,
                fsF_config *cfg, fsF_issues *iss) {
  static const fsF_overrides none = {0};
  if (!o) o = &none;
  fsF_args a = *args;
  memset(cfg, 0, sizeof *cfg);
  cfg->under_cli = m->under_cli;
  if (from_cli("accelerator", &a.accelerator, o->accelerator, "auto", iss) ||
      from_cli("strategy", &a.strategy, o->strategy, "auto", iss) ||
      from_cli("devices", &a.devices, o->devices, "auto", iss) ||
      from_cli("num_nodes", &a.num_nodes, o->num_nodes, "1", iss) ||
      from_cli("precision", &a.precision, o->precision, "None", iss))
    return -1;

  int64_t nodes = 1;
  if (a.num_nodes.kind != FSF_UNSET && py_int(&a.num_nodes, &nodes, iss)) return -1;

  /* R1: the strategy; names are lower-cased first. */
  int reg = -1, bad = a.strategy.kind != FSF_UNSET && a.strategy.kind != FSF_STRATEGY;
  char *srepr = NULL;
  if (a.strategy.kind == FSF_STR) {
    size_t n = strlen(a.strategy.s);
    char *low = fsA_xrealloc(NULL, n + 1);
    for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)a.strategy.s[i]);
    reg = registry_find(low);
    bad = reg < 0 && strcmp(low, "auto");
    if (bad) srepr = fsF_repr_str(low);
    free(low);
  } else if (bad) {
    srepr = fsF_value_repr(&a.strategy);
  }
  if (bad) {
    fsF_fail(iss, "R1", H_R1,
         "You selected an invalid strategy name: `strategy=%s`. It must be either a string or an instance of `lightning.fabric.strategies.Strategy`. Example choices: auto, ddp, ddp_spawn, deepspeed, dp, ... Find a complete list of options in our documentation at https://lightning.ai",
         srepr);
    free(srepr);
    return -1;
  }

  /* R2: the accelerator name, exact case. */
  const char *acc = "auto";
  if (a.accelerator.kind == FSF_STR) acc = a.accelerator.s;
  int acc_ok = a.accelerator.kind == FSF_UNSET || a.accelerator.kind == FSF_STR;
  if (acc_ok && strcmp(acc, "auto") && strcmp(acc, "gpu")) {
    acc_ok = 0;
    for (int i = 0; i < 4; i++) acc_ok |= !strcmp(acc, accel_names[i]);
  }
  if (!acc_ok) {
    char *r = fsF_value_repr(&a.accelerator);
    fsF_fail(iss, "R2", H_R2,
         "You selected an invalid accelerator name: `accelerator=%s`. Available names are: auto, cpu, cuda, mps, tpu.",
         r);
    free(r);
    return -1;
  }

  if (mps_with_parallel_strategy(&a.strategy, acc, m, iss)) return -1;

  int prec;
  char *prec_text = NULL;
  if (convert_precision(&a.precision, &prec, &prec_text, iss)) return -1;
  int rc = -1;
  if (plugin_or_strategy_flags(&a, prec_text ? (prec >= 0 ? prec_names[prec] : prec_text) : NULL, &acc, iss))
    goto out;

  if (nodes < 1) {
    fsF_fail(iss, "R4", H_NODES, "`num_nodes` must be a positive integer, but got %lld.", (long long)nodes);
    goto out;
  }
  const fsF_value *dv = &a.devices;
  if ((dv->kind == FSF_INT && dv->i == 0) || (dv->kind == FSF_BOOL && !dv->i) ||
      (dv->kind == FSF_FLOAT && dv->f == 0) || (dv->kind == FSF_STR && !strcmp(dv->s, "0")) ||
      (dv->kind == FSF_INTLIST && dv->nints == 0)) {
    char *r = fsF_value_repr(dv);
    fsF_fail(iss, "R5", H_DEV, "`Fabric(devices=%s)` value is not a valid input using %s accelerator.", r, acc);
    free(r);
    goto out;
  }

  /* Resolve auto/gpu, instantiate the accelerator, check availability. */
  if (!strcmp(acc, "auto"))
    cfg->accel = m->xla ? FSF_TPU : m->mps ? FSF_MPS : m->cuda_gpus > 0 ? FSF_CUDA : FSF_CPU;
  else if (!strcmp(acc, "gpu")) {
    if (!m->mps && m->cuda_gpus == 0) {
      fsF_fail(iss, "R6", H_ACC, "No supported gpu backend found!");
      goto out;
    }
    cfg->accel = m->mps ? FSF_MPS : FSF_CUDA;
  } else {
    for (int i = 0; i < 4; i++) if (!strcmp(acc, accel_names[i])) cfg->accel = (fsF_accel)i;
  }
  static const char *const H_XLA = "use a non-XLA strategy and accelerator, or pass --assume=xla";
  static const char *const XLA_MSG = "Requirement 'torch_xla>=1.13' not met. HINT: Try running `pip install -U 'torch_xla>=1.13'`";
  if (cfg->accel == FSF_TPU && !m->xla) { fsF_fail(iss, "R14", H_XLA, "%s", XLA_MSG); goto out; }
  int avail[4] = {1, m->cuda_gpus > 0, m->mps, m->xla};
  if (!avail[cfg->accel]) {
    fsV_buf b = {0};
    fsV_buf_printf(&b, "[");
    for (int i = 0, k = 0; i < 4; i++) if (avail[i]) fsV_buf_printf(&b, "%s'%s'", k++ ? ", " : "", accel_names[i]);
    fsV_buf_printf(&b, "]");
    char *avail_text = fsF_buf_take(&b);
    fsF_fail(iss, "R7", H_ACC,
         "`%s` can not run on your system since the accelerator is not available. The following accelerator(s) is available and can be passed into `accelerator` argument of `Fabric`: %s.",
         fsF_accel_classes[cfg->accel], avail_text);
    free(avail_text);
    goto out;
  }
  if (parse_devices(dv, m, cfg, iss)) goto out;
  cfg->num_nodes = (int)nodes;

  /* Choose the strategy, then Fabric's fallbacks (W7, R15, R10). */
  const fsF_strategy_obj *obj = a.strategy.kind == FSF_STRATEGY ? &a.strategy.strategy : NULL;
  fsF_start start = FSF_START_POPEN;
  if (obj) {
    cfg->cls = obj->cls;
    cfg->strategy_name = fsF_strategy_module[obj->cls];
    start = obj->start_method;
  } else if (reg < 0) { /* auto */
    if (cfg->accel == FSF_TPU) cfg->cls = cfg->devices > 1 ? FSF_XLA : FSF_SINGLE_XLA;
    else if (nodes > 1) cfg->cls = FSF_DDP;
    else if (cfg->devices <= 1) cfg->cls = FSF_SINGLE;
    else { cfg->cls = FSF_DDP; start = m->interactive ? FSF_START_FORK : FSF_START_POPEN; }
    cfg->strategy_name = "auto";
  } else {
    if (registry[reg].cls == FSF_FSDP && cfg->accel == FSF_TPU) reg = registry_find("xla_fsdp");
    if (registry[reg].cls == FSF_DP && cfg->accel == FSF_CPU) {
      fsF_warn(iss, "W7", "use `strategy=\"ddp\"` on CPU", "'dp' is not supported on CPUs, hence setting `strategy='ddp'`.");
      reg = registry_find("ddp");
    }
    if (registry[reg].start == FSF_START_FORK && !m->has_fork) {
      fsF_fail(iss, "R15", "use `strategy=\"ddp_spawn\"`",
           "You selected `Fabric(strategy='%s')` but process forking is not supported on this platform. We recommend `Fabric(strategy='ddp_spawn')` instead.",
           registry[reg].name);
      goto out;
    }
    cfg->cls = registry[reg].cls;
    cfg->strategy_name = registry[reg].name;
    start = registry[reg].start;
    cfg->zero_stage = registry[reg].stage;
    cfg->cpu_offload = registry[reg].offload;
  }
  if (cfg->cls == FSF_FSDP && cfg->accel != FSF_CUDA) {
    /* The resolved flag must be "cuda"/"gpu" (scripts pass names only). */
    fsF_fail(iss, "R10", "use `accelerator=\"cuda\"` with FSDP; on a machine without GPUs, --emulate-cuda runs it on emulated GPUs (--gpus=N only lets `check` pass)",
         "You selected the FSDP strategy but FSDP is only available on GPU. Set `Fabric(accelerator='gpu', ...)` to continue or select a different strategy.");
    goto out;
  }
  if (cfg->cls == FSF_DEEPSPEED && !m->deepspeed) {
    fsF_fail(iss, "R13", "install deepspeed (check with --assume=deepspeed) or pick another strategy",
         "To use the `DeepSpeedStrategy`, you must have DeepSpeed installed. Install it by running `pip install -U deepspeed`.");
    goto out;
  }
  if ((cfg->cls == FSF_XLA || cfg->cls == FSF_SINGLE_XLA || cfg->cls == FSF_XLA_FSDP) && !m->xla) {
    fsF_fail(iss, "R14", H_XLA, "%s", XLA_MSG);
    goto out;
  }

  /* The precision plugin (R12, R11, W8). */
  static const char *const H_R11 = "use one of '32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed'";
  int sharded_ok = prec == FSF_P32 || prec == FSF_P16_TRUE || prec == FSF_PBF16_TRUE ||
                   prec == FSF_P16_MIXED || prec == FSF_PBF16_MIXED;
  char *pr = fsF_repr_str(prec_text ? (prec >= 0 ? prec_names[prec] : prec_text) : "32-true");
  int xla = cfg->cls == FSF_XLA || cfg->cls == FSF_SINGLE_XLA || cfg->cls == FSF_XLA_FSDP;
  if (a.plugin_count[FSF_PT_PRECISION]) {
    /* a plugin object is the precision: none of the checks below (R80 on
     * the accelerator Fabric instantiated) */
    if (a.precision_plugin == FSF_PL_BNB && cfg->accel != FSF_CUDA)
      fsF_fail(iss, "R80", "use `accelerator=\"cuda\"` with BitsandbytesPrecision, or drop the plugin",
               "Bitsandbytes is only supported on CUDA GPUs.");
    /* the strategy takes the plugin through its precision setter (R84, R127) */
    else if ((cfg->cls == FSF_FSDP && a.precision_plugin != FSF_PL_FSDP) || (xla && a.precision_plugin != FSF_PL_XLA)) {
      char *found = fsF_plugin_str((fsF_plugin)a.precision_plugin);
      if (cfg->cls == FSF_FSDP) fsF_check_fsdp_precision(found ? found : "?", iss);
      else if (cfg->cls == FSF_XLA_FSDP) fsF_check_xla_fsdp_new(m, found ? found : "?", iss);
      else fsF_fail(iss, "R88", "pass `XLAPrecision(...)`, or give the precision to Fabric: `Fabric(precision=\"bf16-true\")`",
                    "The XLA strategy can only work with the `XLAPrecision` plugin, found %s", found ? found : "?");
      free(found);
    }
  } else if (cfg->cls == FSF_MP && !(prec == FSF_P32 || prec == FSF_PBF16_MIXED || prec == FSF_PBF16_TRUE || prec == FSF_P16_TRUE)) {
    fsF_fail(iss, "R12", "use 32-true, bf16-mixed, bf16-true or 16-true",
         "The `ModelParallelStrategy` does not support `Fabric(..., precision=%s)`. Choose a different precision among: 32-true, bf16-mixed, bf16-true, 16-true.", pr);
  } else if ((cfg->cls == FSF_DEEPSPEED || cfg->cls == FSF_FSDP) && !sharded_ok) {
    fsF_fail(iss, "R11", H_R11,
         "`precision=%s)` is not supported in %s. `precision` must be one of: ('32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed').",
         pr, cfg->cls == FSF_FSDP ? "FSDP" : "DeepSpeed");
  } else if ((cfg->cls == FSF_XLA || cfg->cls == FSF_SINGLE_XLA || cfg->cls == FSF_XLA_FSDP) && prec >= 0 &&
             !(prec == FSF_P32 || prec == FSF_P16_TRUE || prec == FSF_PBF16_TRUE)) {
    /* the connector makes XLAPrecision(precision): its constructor's check (plugins.c) */
    fsF_plugin_args xp = {.kind = FSF_PL_XLA, .precision = pr}; /* not in its list: refused */
    fsF_check_plugin_new(&xp, m, iss);
  } else if (prec < 0) {
    fsF_fail(iss, "R3", H_R3, "No precision set");
  } else if ((prec == FSF_PTE || prec == FSF_PTE16) && !m->transformer_engine) {
    fsF_fail(iss, "env", "install transformer_engine (check with --assume=transformer-engine) or pick another precision",
         "Requirement 'transformer_engine>=0.11.0' not met. HINT: Try running `pip install -U 'transformer_engine>=0.11.0'`");
  }
  free(pr);
  if (fsF_error(iss)) goto out;
  /* R87: then the strategy's checkpoint_io setter; the XLA strategies take XLACheckpointIO only */
  if (xla && a.plugin_count[FSF_PT_CHECKPOINT_IO] && a.checkpoint_io != FSF_PL_XLA_IO) {
    char *found = fsF_plugin_str((fsF_plugin)a.checkpoint_io);
    fsF_fail(iss, "R87", "pass `XLACheckpointIO()`, or no CheckpointIO plugin, with an XLA strategy",
             "The XLA strategy can only work with the `XLACheckpointIO` plugin, found %s", found ? found : "?");
    free(found);
    goto out;
  }
  if (prec == FSF_P16_MIXED && cfg->accel == FSF_CPU && cfg->cls != FSF_FSDP &&
      cfg->cls != FSF_DEEPSPEED && cfg->cls != FSF_MP) {
    fsF_warn(iss, "W8", "use `precision=\"bf16-mixed\"` on CPU",
         "You passed `Fabric(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'` instead.");
    prec = FSF_PBF16_MIXED;
  }
  cfg->precision = (fsF_prec)prec;

  /* Traits (as Fabric's connector.py derives them). */
  fsF_cls c = cfg->cls;
  cfg->world_size = cfg->devices * cfg->num_nodes;
  cfg->launch_required = c != FSF_SINGLE && c != FSF_SINGLE_XLA && c != FSF_DP;
  cfg->launcher = !cfg->launch_required ? FSF_LAUNCH_NONE
                : c == FSF_XLA || c == FSF_XLA_FSDP ? FSF_LAUNCH_XLA
                : c != FSF_DDP ? FSF_LAUNCH_POPEN
                : start == FSF_START_SPAWN ? FSF_LAUNCH_SPAWN
                : start == FSF_START_FORK ? FSF_LAUNCH_FORK : FSF_LAUNCH_POPEN;
  cfg->launch_needs_fn = cfg->launcher == FSF_LAUNCH_SPAWN || cfg->launcher == FSF_LAUNCH_FORK ||
                         cfg->launcher == FSF_LAUNCH_XLA;
  /* R101 (launchers/multiprocessing.py): a DDPStrategy(start_method="fork")
   * object gets its launcher here; where the platform cannot fork (Windows),
   * Python's only start method is spawn. Names were refused as R15. */
  if (obj && cfg->launcher == FSF_LAUNCH_FORK && !m->has_fork && !cfg->under_cli) {
    fsF_fail(iss, "R101", "use `DDPStrategy(start_method=\"spawn\")`",
             "The start method 'fork' is not available on this platform. Available methods are: spawn");
    goto out;
  }
  /* R69: in an interactive session (the REPL) only a launcher that forks
   * the session itself, or XLA's, can start the ranks: a subprocess launcher
   * would start the script again, and spawn pickles what a REPL cannot
   * (connector.py, _lazy_init_strategy: launcher.is_interactive_compatible).
   * Fabric refuses such a launcher even for one process; the REPL, which
   * starts no process for one rank, refuses it only for more than one. */
  if (m->interactive && cfg->launch_required && cfg->world_size > 1 &&
      cfg->launcher != FSF_LAUNCH_FORK && cfg->launcher != FSF_LAUNCH_XLA) {
    char *flag = obj ? NULL : fsF_repr_str(reg >= 0 ? registry[reg].name : "ddp");
    fsF_fail(iss, "R69", "run the code as a script, or use `strategy=\"ddp_notebook\"` in the REPL",
             "`Fabric(strategy=%s)` is not compatible with an interactive environment. Run your code as a script, or choose one of the compatible strategies: `Fabric(strategy='dp'|'ddp_notebook')`. In case you are spawning processes yourself, make sure to include the Fabric creation inside the worker function.",
             flag ? flag : fsF_cls_name(obj->cls));
    free(flag);
    goto out;
  }
  if (cfg->accel == FSF_TPU && c != FSF_XLA && c != FSF_SINGLE_XLA && c != FSF_XLA_FSDP) {
    fsF_fail(iss, "R74", "use an XLA strategy with the TPU accelerator: `strategy=\"xla\"` or `\"xla_fsdp\"` (or \"auto\")",
             "The `XLAAccelerator` can only be used with a `SingleDeviceXLAStrategy`, `XLAStrategy`, or `XLAFSDPStrategy`. Found %s.",
             fsF_cls_name(c));
    goto out;
  }
  cfg->setup_optimizers_allowed = c != FSF_DEEPSPEED && c != FSF_XLA;
  int mixed = cfg->precision == FSF_P16_MIXED || cfg->precision == FSF_PBF16_MIXED;
  cfg->fabric_backward_required = c == FSF_FSDP || c == FSF_DEEPSPEED ||
      (mixed && c != FSF_XLA && c != FSF_SINGLE_XLA && c != FSF_XLA_FSDP);
  cfg->no_backward_sync = c == FSF_SINGLE || c == FSF_XLA || c == FSF_SINGLE_XLA ? FSF_NBS_NOOP
                        : c == FSF_DP || c == FSF_DEEPSPEED ? FSF_NBS_WARN : FSF_NBS_SKIP;
  cfg->use_orig_params = c == FSF_FSDP && (!obj || obj->use_orig_params != 0);
  cfg->state_dict_sharded = (c == FSF_FSDP && !(obj && obj->state_dict_full > 0)) || c == FSF_MP;
  cfg->save_distributed = c == FSF_MP && (!obj || obj->save_distributed != 0);
  if (obj) {
    cfg->cpu_offload = obj->cpu_offload > 0;
    cfg->auto_wrap_policy = obj->auto_wrap_policy > 0;
    if (c == FSF_MP) { /* "auto": one data-parallel group per node, tensor parallel within it */
      cfg->mp_dp_size = obj->dp_given ? obj->dp_size : cfg->num_nodes;
      cfg->mp_tp_size = obj->tp_given ? obj->tp_size : cfg->devices;
    }
    if (c == FSF_FSDP && obj->state_dict_unknown) { /* R90: neither sharded nor full */
      snprintf(cfg->state_dict_unknown, sizeof cfg->state_dict_unknown, "%s", obj->state_dict_unknown);
      cfg->state_dict_sharded = 0;
    }
    if (c == FSF_DEEPSPEED) cfg->zero_stage = obj->stage >= 0 ? obj->stage : 2;
    cfg->xla_fsdp = obj->xla_fsdp;
    cfg->parallel_devices = obj->parallel_devices != FSF_PD_NONE;
    cfg->strategy_precision = obj->precision;
  }
  rc = 0;
out:
  free(prec_text);
  return rc;
}
