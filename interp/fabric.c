/* fabric.c -- Fabric's configuration resolution, object states and API
 * validations. Message texts are Fabric's, byte for byte (fabric-rules.md),
 * typos and double spaces included; "Source" lines there name the origin. */
#include "fabric.h"
#include "value.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text ------------------------------------------------------------- */

/* Text is built in value.c's growing string; out of memory ends the process. */
static char *buf_take(fsV_buf *b) {
  char *s = fsV_buf_take(b);
  if (!s) fsA_oom();
  return s;
}

/* ---- issues ------------------------------------------------------------ */

void fsF_issues_init(fsF_issues *iss) { memset(iss, 0, sizeof *iss); }

void fsF_issues_clear(fsF_issues *iss) {
  for (size_t i = 0; i < iss->n; i++) free(iss->items[i].message);
  iss->n = 0;
}

void fsF_issues_free(fsF_issues *iss) {
  fsF_issues_clear(iss);
  free(iss->items);
  fsF_issues_init(iss);
}

const fsF_issue *fsF_error(const fsF_issues *iss) {
  if (iss->n && iss->items[iss->n - 1].severity == FS_SEV_ERROR) return &iss->items[iss->n - 1];
  return NULL;
}

static void vadd(fsF_issues *iss, fs_severity sev, const char *rule, const char *help,
                 const char *fmt, va_list ap) {
  if (iss->n == iss->cap) {
    iss->cap = iss->cap ? iss->cap * 2 : 4;
    iss->items = fsA_xrealloc(iss->items, iss->cap * sizeof *iss->items);
  }
  va_list cp;
  va_copy(cp, ap);
  int k = vsnprintf(NULL, 0, fmt, cp);
  va_end(cp);
  char *msg = fsA_xrealloc(NULL, (size_t)(k < 0 ? 0 : k) + 1);
  vsnprintf(msg, (size_t)(k < 0 ? 0 : k) + 1, fmt, ap);
  iss->items[iss->n++] = (fsF_issue){rule, sev, msg, help};
}

/* Adds an error and returns -1, so a check reads `return fail(...)`. */
static int fail(fsF_issues *iss, const char *rule, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(fsF_issues *iss, const char *rule, const char *help, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vadd(iss, FS_SEV_ERROR, rule, help, fmt, ap);
  va_end(ap);
  return -1;
}

static void warn(fsF_issues *iss, const char *rule, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void warn(fsF_issues *iss, const char *rule, const char *help, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vadd(iss, FS_SEV_WARNING, rule, help, fmt, ap);
  va_end(ap);
}

/* ---- Python reprs ------------------------------------------------------ */

/* Python's reprs are value.c's, so they read the same in every message. */
static void sb_repr_str(fsV_buf *b, const char *s) {
  fs_value v = {.refcount = -1, .type = FSV_STR, .u.str = {(char *)s, strlen(s)}};
  fsV_buf_repr(b, &v);
}

char *fsF_repr_str(const char *s) {
  fsV_buf b = {0};
  sb_repr_str(&b, s);
  return buf_take(&b);
}

static const char *const strategy_module[FSF_CLS__COUNT] = {
  [FSF_SINGLE] = "single_device", [FSF_DP] = "dp", [FSF_DDP] = "ddp",
  [FSF_FSDP] = "fsdp", [FSF_DEEPSPEED] = "deepspeed", [FSF_MP] = "model_parallel",
  [FSF_XLA] = "xla", [FSF_SINGLE_XLA] = "single_xla", [FSF_XLA_FSDP] = "xla_fsdp",
};

static void sb_repr_value(fsV_buf *b, const fsF_value *v, int as_str) {
  switch (v->kind) {
  case FSF_UNSET: case FSF_NONE: fsV_buf_printf(b, "None"); break;
  case FSF_BOOL: fsV_buf_printf(b, v->i ? "True" : "False"); break;
  case FSF_INT: fsV_buf_printf(b, "%lld", (long long)v->i); break;
  case FSF_FLOAT: { char f[40]; fsV_float_repr(v->f, f, sizeof f); fsV_buf_puts(b, f); break; }
  case FSF_STR: if (as_str) fsV_buf_printf(b, "%s", v->s); else sb_repr_str(b, v->s); break;
  case FSF_INTLIST:
    fsV_buf_printf(b, "[");
    for (size_t i = 0; i < v->nints; i++) fsV_buf_printf(b, "%s%lld", i ? ", " : "", (long long)v->ints[i]);
    fsV_buf_printf(b, "]");
    break;
  case FSF_STRATEGY:
    /* A fixed address: real Fabric prints the object's, which varies. */
    fsV_buf_printf(b, "<lightning.fabric.strategies.%s.%s object at 0x7f0000000000>",
           strategy_module[v->strategy.cls], fsF_cls_name(v->strategy.cls));
    break;
  case FSF_LIST: case FSF_OTHER: fsV_buf_printf(b, "%s", v->s ? v->s : "<object>"); break;
  }
}

char *fsF_value_repr(const fsF_value *v) {
  fsV_buf b = {0};
  sb_repr_value(&b, v, 0);
  return buf_take(&b);
}

char *fsF_value_str(const fsF_value *v) {
  fsV_buf b = {0};
  sb_repr_value(&b, v, 1);
  return buf_take(&b);
}

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

static const char *const accel_names[] = {"cpu", "cuda", "mps", "tpu"};
static const char *const accel_classes[] = {
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
        else if (k == 7 && !strncmp(p, "no-fork", k)) m->has_fork = 0;
        else { *err = "--assume takes deepspeed, xla, mps, transformer-engine, cli, no-fork"; return -1; }
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
    if (isnan(v->f)) return fail(iss, "R4", H_NODES, "cannot convert float NaN to integer");
    if (isinf(v->f)) return fail(iss, "R4", H_NODES, "cannot convert float infinity to integer");
    if (fabs(v->f) >= 9.2e18) return fail(iss, "R4", H_NODES, "Python int too large to convert to C int");
    *out = (int64_t)v->f; return 0;
  case FSF_STR: {
    const char *p = v->s;
    while (isspace((unsigned char)*p)) p++;
    char *end;
    long long x = strtoll(p, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (end == p || *end || !isdigit((unsigned char)p[*p == '-' || *p == '+'])) {
      char *r = fsF_repr_str(v->s);
      fail(iss, "R4", H_NODES, "invalid literal for int() with base 10: %s", r);
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
    return fail(iss, "R4", H_NODES,
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
    fail(iss, "R68", "drop the value either from the command line or from `Fabric(...)`",
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
    fail(iss, "R3", H_R3,
         "Precision %s is invalid. Allowed precision values: ('transformer-engine', 'transformer-engine-float16', '16-true', '16-mixed', 'bf16-true', 'bf16-mixed', '32-true', '64-true', 64, 32, 16, '64', '32', '16', 'bf16')",
         r);
    free(r);
    return -1;
  }
  *text = fsF_value_str(v);
  if (v->kind == FSF_FLOAT) { *prec = -1; return 0; }
  if (precisions[idx].legacy)
    warn(iss, "W9", "write the precision's full name",
         "`precision=%s` is supported for historical reasons but its usage is discouraged. Please set your precision to %s instead!",
         *text, prec_names[precisions[idx].prec]);
  *prec = (int)precisions[idx].prec;
  return 0;
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
  if (v->kind == FSF_LIST) return fail(iss, "R9", H_R9, "%s a sequence of %s.", msg, v->tname ? v->tname : "object");
  if (v->kind != FSF_INT && v->kind != FSF_STR && v->kind != FSF_INTLIST) {
    char *r = fsF_value_repr(v);
    fail(iss, "R9", H_R9, "%s %s.", msg, r);
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
  if (n == 0) return fail(iss, "R9", H_R9, "GPUs requested but none are available.");
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < i; j++)
      if (ids[i] == ids[j]) return fail(iss, "R9", H_R9, "Device ID's (GPU) must be unique.");
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
    char *req = buf_take(&b), *have = buf_take(&a);
    fail(iss, "R9", H_R9, "You requested gpu: %s\n But your machine only has: %s", req, have);
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
      return fail(iss, "R8", "ask for a positive number of CPU processes, e.g. `devices=2`",
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
    fail(iss, "R1", H_R1,
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
    fail(iss, "R2", H_R2,
         "You selected an invalid accelerator name: `accelerator=%s`. Available names are: auto, cpu, cuda, mps, tpu.",
         r);
    free(r);
    return -1;
  }

  int prec;
  char *prec_text = NULL;
  if (convert_precision(&a.precision, &prec, &prec_text, iss)) return -1;
  int rc = -1;

  if (nodes < 1) {
    fail(iss, "R4", H_NODES, "`num_nodes` must be a positive integer, but got %lld.", (long long)nodes);
    goto out;
  }
  const fsF_value *dv = &a.devices;
  if ((dv->kind == FSF_INT && dv->i == 0) || (dv->kind == FSF_BOOL && !dv->i) ||
      (dv->kind == FSF_FLOAT && dv->f == 0) || (dv->kind == FSF_STR && !strcmp(dv->s, "0")) ||
      (dv->kind == FSF_INTLIST && dv->nints == 0)) {
    char *r = fsF_value_repr(dv);
    fail(iss, "R5", H_DEV, "`Fabric(devices=%s)` value is not a valid input using %s accelerator.", r, acc);
    free(r);
    goto out;
  }

  /* Resolve auto/gpu, instantiate the accelerator, check availability. */
  if (!strcmp(acc, "auto"))
    cfg->accel = m->xla ? FSF_TPU : m->mps ? FSF_MPS : m->cuda_gpus > 0 ? FSF_CUDA : FSF_CPU;
  else if (!strcmp(acc, "gpu")) {
    if (!m->mps && m->cuda_gpus == 0) {
      fail(iss, "R6", H_ACC, "No supported gpu backend found!");
      goto out;
    }
    cfg->accel = m->mps ? FSF_MPS : FSF_CUDA;
  } else {
    for (int i = 0; i < 4; i++) if (!strcmp(acc, accel_names[i])) cfg->accel = (fsF_accel)i;
  }
  static const char *const H_XLA = "use a non-XLA strategy and accelerator, or pass --assume=xla";
  static const char *const XLA_MSG = "Requirement 'torch_xla>=1.13' not met. HINT: Try running `pip install -U 'torch_xla>=1.13'`";
  if (cfg->accel == FSF_TPU && !m->xla) { fail(iss, "R14", H_XLA, "%s", XLA_MSG); goto out; }
  int avail[4] = {1, m->cuda_gpus > 0, m->mps, m->xla};
  if (!avail[cfg->accel]) {
    fsV_buf b = {0};
    fsV_buf_printf(&b, "[");
    for (int i = 0, k = 0; i < 4; i++) if (avail[i]) fsV_buf_printf(&b, "%s'%s'", k++ ? ", " : "", accel_names[i]);
    fsV_buf_printf(&b, "]");
    char *avail_text = buf_take(&b);
    fail(iss, "R7", H_ACC,
         "`%s` can not run on your system since the accelerator is not available. The following accelerator(s) is available and can be passed into `accelerator` argument of `Fabric`: %s.",
         accel_classes[cfg->accel], avail_text);
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
    cfg->strategy_name = strategy_module[obj->cls];
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
      warn(iss, "W7", "use `strategy=\"ddp\"` on CPU", "'dp' is not supported on CPUs, hence setting `strategy='ddp'`.");
      reg = registry_find("ddp");
    }
    if (registry[reg].start == FSF_START_FORK && !m->has_fork) {
      fail(iss, "R15", "use `strategy=\"ddp_spawn\"`",
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
    fail(iss, "R10", "use `accelerator=\"cuda\"` with FSDP (pass --gpus=N on a machine without GPUs)",
         "You selected the FSDP strategy but FSDP is only available on GPU. Set `Fabric(accelerator='gpu', ...)` to continue or select a different strategy.");
    goto out;
  }
  if (cfg->cls == FSF_DEEPSPEED && !m->deepspeed) {
    fail(iss, "R13", "install deepspeed (check with --assume=deepspeed) or pick another strategy",
         "To use the `DeepSpeedStrategy`, you must have DeepSpeed installed. Install it by running `pip install -U deepspeed`.");
    goto out;
  }
  if ((cfg->cls == FSF_XLA || cfg->cls == FSF_SINGLE_XLA || cfg->cls == FSF_XLA_FSDP) && !m->xla) {
    fail(iss, "R14", H_XLA, "%s", XLA_MSG);
    goto out;
  }

  /* The precision plugin (R12, R11, W8). */
  static const char *const H_R11 = "use one of '32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed'";
  int sharded_ok = prec == FSF_P32 || prec == FSF_P16_TRUE || prec == FSF_PBF16_TRUE ||
                   prec == FSF_P16_MIXED || prec == FSF_PBF16_MIXED;
  char *pr = fsF_repr_str(prec_text ? (prec >= 0 ? prec_names[prec] : prec_text) : "32-true");
  if (cfg->cls == FSF_MP && !(prec == FSF_P32 || prec == FSF_PBF16_MIXED || prec == FSF_PBF16_TRUE || prec == FSF_P16_TRUE)) {
    fail(iss, "R12", "use 32-true, bf16-mixed, bf16-true or 16-true",
         "The `ModelParallelStrategy` does not support `Fabric(..., precision=%s)`. Choose a different precision among: 32-true, bf16-mixed, bf16-true, 16-true.", pr);
  } else if ((cfg->cls == FSF_DEEPSPEED || cfg->cls == FSF_FSDP) && !sharded_ok) {
    fail(iss, "R11", H_R11,
         "`precision=%s)` is not supported in %s. `precision` must be one of: ('32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed').",
         pr, cfg->cls == FSF_FSDP ? "FSDP" : "DeepSpeed");
  } else if (prec < 0) {
    fail(iss, "R3", H_R3, "No precision set");
  } else if ((prec == FSF_PTE || prec == FSF_PTE16) && !m->transformer_engine) {
    fail(iss, "env", "install transformer_engine (check with --assume=transformer-engine) or pick another precision",
         "Requirement 'transformer_engine>=0.11.0' not met. HINT: Try running `pip install -U 'transformer_engine>=0.11.0'`");
  }
  free(pr);
  if (fsF_error(iss)) goto out;
  if (prec == FSF_P16_MIXED && cfg->accel == FSF_CPU && cfg->cls != FSF_FSDP &&
      cfg->cls != FSF_DEEPSPEED && cfg->cls != FSF_MP) {
    warn(iss, "W8", "use `precision=\"bf16-mixed\"` on CPU",
         "You passed `Fabric(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'` instead.");
    prec = FSF_PBF16_MIXED;
  }
  cfg->precision = (fsF_prec)prec;

  /* Traits (fabric-rules.md 1.1). */
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
  /* R69: in an interactive session (the REPL) only a launcher that forks
   * the session itself, or XLA's, can start the ranks: a subprocess launcher
   * would start the script again, and spawn pickles what a REPL cannot
   * (connector.py, _lazy_init_strategy: launcher.is_interactive_compatible).
   * Fabric refuses such a launcher even for one process; the REPL, which
   * starts no process for one rank, refuses it only for more than one. */
  if (m->interactive && cfg->launch_required && cfg->world_size > 1 &&
      cfg->launcher != FSF_LAUNCH_FORK && cfg->launcher != FSF_LAUNCH_XLA) {
    char *flag = obj ? NULL : fsF_repr_str(reg >= 0 ? registry[reg].name : "ddp");
    fail(iss, "R69", "run the code as a script, or use `strategy=\"ddp_notebook\"` in the REPL",
         "`Fabric(strategy=%s)` is not compatible with an interactive environment. Run your code as a script, or choose one of the compatible strategies: `Fabric(strategy='dp'|'ddp_notebook')`. In case you are spawning processes yourself, make sure to include the Fabric creation inside the worker function.",
         flag ? flag : fsF_cls_name(obj->cls));
    free(flag);
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
    if (c == FSF_DEEPSPEED) cfg->zero_stage = obj->stage >= 0 ? obj->stage : 2;
  }
  rc = 0;
out:
  free(prec_text);
  return rc;
}

/* ---- object states ------------------------------------------------------ */

void fsF_fabric_init(fsF_fabric *f, const fsF_config *cfg) {
  f->cfg = cfg;
  f->launched = cfg->under_cli;
  f->models_setup = 0;
}

fsF_optim fsF_optim_over(const fsF_fabric *f, const fsF_model *m) {
  fsF_optim o = {0};
  o.meta_params = m->meta;
  o.fsdp_flat = m->wrapped && m->fsdp_root;
  o.xla_sharded = m->wrapped && f->cfg->cls == FSF_XLA_FSDP;
  return o;
}

fsF_init fsF_init_module_effect(const fsF_config *cfg, int empty_init) {
  if (cfg->cls == FSF_DEEPSPEED && cfg->zero_stage == 3) return FSF_INIT_PARTITIONED;
  if (empty_init <= 0) return FSF_INIT_NORMAL;
  return cfg->cls == FSF_FSDP || cfg->cls == FSF_MP ? FSF_INIT_META : FSF_INIT_EMPTY;
}

/* Strategies whose setup materializes meta parameters instead of `.to()`. */
static int materializes(fsF_cls c) { return c == FSF_FSDP || c == FSF_MP || c == FSF_XLA_FSDP; }

void fsF_setup_done(fsF_fabric *f, fsF_model *m) {
  fsF_cls c = f->cfg->cls;
  f->models_setup++;
  m->wrapped = 1;
  m->fsdp_root = c == FSF_FSDP && !m->has_fsdp_submodules;
  if (m->meta && materializes(c) && !(c == FSF_FSDP && m->has_fsdp_submodules)) {
    m->meta = 0;
    m->generation++;
  }
}

void fsF_setup_optim_done(fsF_optim *o) { o->wrapped = 1; }

/* ---- validations -------------------------------------------------------- */

static const char *const H_R16 = "call `fabric.launch()` right after creating the Fabric object";

static int launched(const fsF_fabric *f, fsF_issues *iss) {
  if (f->cfg->launch_required && !f->launched)
    return fail(iss, "R16", H_R16,
                "To use Fabric with more than one device, you must call `.launch()` or use the CLI: `fabric run --help`.");
  return 0;
}

/* Moving the module to the device; FSDP, mp and xla_fsdp materialize instead. */
static int move_to_device(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (m->meta && !materializes(f->cfg->cls))
    return fail(iss, "meta-move", "create the model without `device(\"meta\")`, or call `model.to_empty(device=...)` and `model.reset_parameters()` (or load a checkpoint) before setup",
                "Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving module from meta to a different device.");
  return 0;
}

static void wrap_warnings(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (c->cls == FSF_FSDP) {
    if (m->has_fsdp_submodules && m->meta)
      warn(iss, "W1", NULL, "The model is already wrapped in `FSDP` but there are still parameters on the meta device.");
    if (m->has_fsdp_submodules && c->auto_wrap_policy)
      warn(iss, "W2", NULL, "A FSDP `auto_wrap_policy` is set, but the model is already wrapped. The policy will be ignored.");
  }
  if (c->cls == FSF_MP && m->meta && m->no_reset)
    warn(iss, "W3", "define `reset_parameters()` in those modules",
         "Parameter initialization incomplete. The following modules have parameters or buffers with uninitialized memory because they don't define a `reset_parameters()` method for re-initialization: %s",
         m->no_reset);
}

/* W10: emitted whenever FSDP builds its mixed-precision config. */
static void fsdp_true_half(const fsF_fabric *f, fsF_issues *iss) {
  fsF_prec p = f->cfg->precision;
  if (f->cfg->cls == FSF_FSDP && (p == FSF_P16_TRUE || p == FSF_PBF16_TRUE))
    warn(iss, "W10", "informational: the shards stay float32 and compute runs in the lower precision; "
         "for float32 weights with bfloat16 autocast, use `precision=\"bf16-mixed\"`",
         "FSDP with `%s` enables computation in lower precision. FSDP will always retain a full-precision copy of the model parameters for sharding.",
         prec_names[p]);
}

static const char *const H_SEPARATE =
    "set up the model first (`model = fabric.setup_module(model)`), then create the optimizer and call `optimizer = fabric.setup_optimizers(optimizer)`";

int fsF_check_setup(const fsF_fabric *f, const fsF_model *m,
                    const fsF_optim *const *opts, size_t nopts, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (launched(f, iss)) return -1;
  if (m->wrapped)
    return fail(iss, "R22", "use the model returned by the first setup; do not set it up again",
                "A model should be passed only once to the `setup` method.");
  int meta_opt = 0;
  for (size_t i = 0; i < nopts; i++) {
    if (opts[i]->wrapped)
      return fail(iss, "R23", "pass the raw optimizer only once",
                  "An optimizer should be passed only once to the `setup` method.");
    meta_opt |= opts[i]->meta_params;
  }
  if (c->cls == FSF_FSDP && meta_opt)
    return fail(iss, "R36", H_SEPARATE,
                "The optimizer has references to the model's meta-device parameters. Materializing them is is currently not supported unless you to set up the model and optimizer(s) separately. Create and set up the model first through `model = fabric.setup_module(model)`. Then create the optimizer and set it up: `optimizer = fabric.setup_optimizers(optimizer)`.");
  if (move_to_device(f, m, iss)) return -1;
  if (c->cls == FSF_DEEPSPEED && nopts >= 2)
    return fail(iss, "R31", "set up one model with one optimizer per `setup` call",
                "Currently only one optimizer is supported with DeepSpeed. Got %zu optimizers instead.", nopts);
  if (c->cls == FSF_FSDP && !c->use_orig_params && nopts)
    return fail(iss, "R32", H_SEPARATE,
                "You set `FSDPStrategy(use_orig_params=False)` but this is not supported when setting the model and optimizer up jointly. Either set it to `True` or set the objects up in this order: Create the model, call `setup_module`, create the optimizer, call `setup_optimizer`.");
  if (c->cls == FSF_XLA_FSDP && nopts)
    return fail(iss, "R34", H_SEPARATE,
                "The `XLAFSDPStrategy` does not support the joint setup of module and optimizer(s). Please do it in this order: Create the model, call `setup_module`, create the optimizer, call `setup_optimizer`.");
  wrap_warnings(f, m, iss);
  fsdp_true_half(f, iss);
  if (c->cls == FSF_MP && meta_opt)
    warn(iss, "meta-optimizer", H_SEPARATE,
         "the optimizer references the model's meta-device parameters; `ModelParallelStrategy` materializes the model into new parameters at setup and the optimizer keeps the old meta ones, so it will update nothing (Fabric raises no error here)");
  return 0;
}

int fsF_check_setup_module(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (launched(f, iss)) return -1;
  if (m->wrapped)
    return fail(iss, "R24", "use the model returned by the first `setup_module`",
                "A model should be passed only once to the `setup_module` method.");
  if (move_to_device(f, m, iss)) return -1;
  wrap_warnings(f, m, iss);
  fsdp_true_half(f, iss);
  return 0;
}

int fsF_check_setup_optimizers(const fsF_fabric *f, const fsF_optim *const *opts,
                               size_t nopts, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (launched(f, iss)) return -1;
  if (!c->setup_optimizers_allowed)
    return fail(iss, "R25", "set up the model and optimizer together: `model, optimizer = fabric.setup(model, optimizer)`",
                "The `%s` requires the model and optimizer(s) to be set up jointly through `.setup(model, optimizer, ...)`.",
                fsF_cls_name(c->cls));
  if (!nopts)
    return fail(iss, "R26", "pass the optimizer: `fabric.setup_optimizers(optimizer)`",
                "`setup_optimizers` requires at least one optimizer as input.");
  for (size_t i = 0; i < nopts; i++)
    if (opts[i]->wrapped)
      return fail(iss, "R27", "keep the optimizer returned by the first setup",
                  "An optimizer should be passed only once to the `setup_optimizers` method.");
  for (size_t i = 0; i < nopts; i++)
    if (opts[i]->meta_params)
      return fail(iss, "R37", "create the optimizer from `model.parameters()` after `model = fabric.setup_module(model)`",
                  "The optimizer has references to the model's meta-device parameters. Materializing them is is currently not supported. Create the optimizer after setting up the model, then call `fabric.setup_optimizers(optimizer)`.");
  for (size_t i = 0; i < nopts; i++) {
    if (c->cls == FSF_FSDP && !c->use_orig_params && !opts[i]->fsdp_flat)
      return fail(iss, "R33", "create the optimizer after `model = fabric.setup_module(model)`, from the returned model's parameters",
                  "The optimizer does not seem to reference any FSDP parameters. HINT: Make sure to create the optimizer after setting up the model.");
    if (c->cls == FSF_XLA_FSDP && !opts[i]->xla_sharded)
      return fail(iss, "R35", "create the optimizer after `model = fabric.setup_module(model)`, from the returned model's parameters",
                  "The optimizer does not seem to reference any XLAFSDP parameters. HINT: Make sure to create the optimizer after setting up the model.");
  }
  return 0;
}

int fsF_check_setup_dataloaders(const fsF_fabric *f, const fsF_loader *const *dls,
                                size_t n, fsF_issues *iss) {
  if (launched(f, iss)) return -1;
  if (!n)
    return fail(iss, "R28", "pass the loader: `fabric.setup_dataloaders(loader)`",
                "`setup_dataloaders` requires at least one dataloader as input.");
  for (size_t i = 0; i < n; i++)
    if (dls[i]->wrapped)
      return fail(iss, "R29", "set each dataloader up once",
                  "A dataloader should be passed only once to the `setup_dataloaders` method.");
  for (size_t i = 0; i < n; i++)
    if (!dls[i]->is_dataloader)
      return fail(iss, "R30", "wrap it first: `DataLoader(dataset, batch_size=...)`",
                  "Only PyTorch DataLoader are currently supported in `setup_dataloaders`.");
  return 0;
}

int fsF_check_backward(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (m && !m->wrapped)
    return fail(iss, "R41", "pass the model returned by `fabric.setup`",
                "'%s' object has no attribute '_forward_module'", m->class_name);
  if (f->cfg->cls == FSF_DEEPSPEED && !m) {
    if (f->models_setup == 0)
      return fail(iss, "R39", "set up the model first: `model, optimizer = fabric.setup(model, optimizer)`",
                  "No models were set up for backward. Did you forget to call `fabric.setup()`?");
    if (f->models_setup > 1)
      return fail(iss, "R40", "name the model: `fabric.backward(loss, model=model)`",
                  "When using multiple models + deepspeed, please provide the model used to perform the optimization: `self.backward(loss, model=model)`");
  }
  return 0;
}

int fsF_check_tensor_backward(const fsF_fabric *f, fsF_issues *iss) {
  if (f->cfg->fabric_backward_required)
    return fail(iss, "R42", "call `fabric.backward(loss)` instead",
                "The current strategy and precision selection requires you to call `fabric.backward(loss)` instead of `loss.backward()`.");
  return 0;
}

int fsF_check_clip_gradients(const fsF_fabric *f, const fsF_model *m,
                             int has_clip_val, int has_max_norm, fsF_issues *iss) {
  static const char *const H_R45 = "remove the call and set `gradient_clipping` in the DeepSpeed config";
  static const char *const R45 = "DeepSpeed handles gradient clipping automatically within the optimizer. Make sure to set the `gradient_clipping` value in your Config.";
  fsF_cls c = f->cfg->cls;
  if (has_clip_val && has_max_norm)
    return fail(iss, "R43", "pass only one of `clip_val` and `max_norm`",
                "Only one of `clip_val` or `max_norm` can be set as this specifies the underlying clipping algorithm!");
  if (has_clip_val) {
    if (c == FSF_DEEPSPEED) return fail(iss, "R45", H_R45, "%s", R45);
    if (c == FSF_XLA_FSDP)
      return fail(iss, "R46", "clip by norm instead: `max_norm=1.0`",
                  "XLA's FSDP strategy does not support to clip gradients by value. Consider clipping by norm instead or choose another strategy!");
    return 0;
  }
  if (has_max_norm) {
    if (c == FSF_DEEPSPEED) return fail(iss, "R45", H_R45, "%s", R45);
    if (c == FSF_FSDP && !(m->wrapped && m->fsdp_root))
      return fail(iss, "R47", "pass the model returned by `fabric.setup`",
                  "Gradient clipping with FSDP is only possible if the module passed to `%s.clip_gradients_norm` is wrapped in `FullyShardedDataParallel`. Got: %s.",
                  fsF_cls_name(c), m->class_name);
    return 0;
  }
  return fail(iss, "R44", "pass `max_norm=` (or `clip_val=`)",
              "You have to specify either `clip_val` or `max_norm` to do gradient clipping!");
}

int fsF_check_no_backward_sync(const fsF_fabric *f, const fsF_model *m, fsF_issues *iss) {
  if (!m->wrapped)
    return fail(iss, "R48", "pass the model returned by `fabric.setup`",
                "You need to set up the model first before you can call `fabric.no_backward_sync()`: `model = fabric.setup(model, ...)`");
  if (f->cfg->no_backward_sync == FSF_NBS_WARN)
    warn(iss, "W5", "remove `fabric.no_backward_sync(...)`",
         "The `%s` does not support skipping the gradient synchronization. Remove `.no_backward_sync()` from your code or choose a different strategy.",
         fsF_cls_name(f->cfg->cls));
  return 0;
}

int fsF_check_launch(fsF_fabric *f, fsF_fn kind, const char *str_of,
                     const char *fn_name, int fn_nparams, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  if (c->under_cli)
    return fail(iss, "R20", "remove `fabric.launch()`: the CLI already created the processes",
                "This script was launched through the CLI, and processes have already been created. Calling  `.launch()` again is not allowed.");
  if (kind == FSF_FN_NOT_CALLABLE)
    return fail(iss, "R18", "pass the function itself: `.launch(train)`",
                "`Fabric.launch(...)` needs to be a callable, but got %s. HINT: do `.launch(your_fn)` instead of `.launch(your_fn())`",
                str_of);
  /* A fixed address: Fabric prints the function object's, which varies. */
  if (kind == FSF_FN_CALLABLE && fn_nparams == 0)
    return fail(iss, "R19", "give the function a parameter: `def train(fabric):`",
                "`Fabric.launch(function=<function %s at 0x7f0000000000>)` needs to take at least one argument. The launcher will pass in the `Fabric` object so you can use it inside the function.",
                fn_name);
  if (kind == FSF_FN_NONE && c->launch_needs_fn)
    return fail(iss, "R17", "put the training code in `def train(fabric):` and call `fabric.launch(train)`",
                "To spawn processes with the `%s` strategy, `.launch()` needs to be called with a function that contains the code to launch in processes.",
                fsF_cls_name(c->cls));
  f->launched = 1;
  if (c->cls == FSF_DEEPSPEED && c->accel != FSF_CUDA)
    return fail(iss, "R21", "use `accelerator=\"cuda\"` with DeepSpeed",
                "The DeepSpeed strategy is only supported on CUDA GPUs but `%s` is used.", accel_classes[c->accel]);
  if ((c->cls == FSF_XLA || c->cls == FSF_XLA_FSDP) && c->devices == 1)
    return fail(iss, "R67", "use all devices, or `Fabric(accelerator=\"tpu\", devices=1)`",
                "The %s does not support running on a single device with the PjRT runtime. Try using all devices or the `SingleDeviceXLAStrategy` strategy",
                fsF_cls_name(c->cls));
  return 0;
}

int fsF_check_init_module(const fsF_fabric *f, int empty_init, fsF_issues *iss) {
  if (launched(f, iss)) return -1;
  if (f->cfg->cls == FSF_DEEPSPEED && f->cfg->zero_stage == 3 && empty_init == 0)
    return fail(iss, "R38", "use `fabric.init_module()` (or `empty_init=True`)",
                "`empty_init=False` is not a valid choice with `DeepSpeedStrategy` when ZeRO stage 3 is enabled.");
  fsdp_true_half(f, iss);
  return 0;
}

int fsF_check_collective(const fsF_fabric *f, fsF_issues *iss) { return launched(f, iss); }

int fsF_check_device(const fsF_fabric *f, fsF_issues *iss) {
  if (f->cfg->cls == FSF_XLA && !f->launched)
    return fail(iss, "R66", "use the device inside the function passed to `fabric.launch(fn)`",
                "Accessing the XLA device before processes have spawned is not allowed.");
  return 0;
}

/* Set-up models in a checkpoint state that the strategy shards. */
static int count_sharded(const fsF_fabric *f, const fsF_entry *st, size_t n) {
  int k = 0;
  for (size_t i = 0; i < n; i++) {
    const fsF_model *m = st[i].kind == FSF_S_MODEL ? st[i].model : NULL;
    if (!m) continue;
    if (f->cfg->cls == FSF_FSDP) k += (m->wrapped && m->fsdp_root) || m->has_fsdp_submodules;
    else k += m->wrapped;
  }
  return k;
}

static const char *const H_STATE = "put the set-up model in the state: `{\"model\": model, \"optimizer\": optimizer}`";
static const char *const H_ONE = "use one checkpoint (and path) per model";

/* R61/R62/R65 for save (saving=1) and load. */
static int sharded_state(const fsF_fabric *f, const fsF_entry *st, size_t n, int saving,
                         fsF_issues *iss) {
  fsF_cls c = f->cfg->cls;
  if (c != FSF_FSDP && c != FSF_DEEPSPEED) return 0;
  int k = count_sharded(f, st, n);
  const char *who = c == FSF_FSDP ? "FSDP" : "DeepSpeed";
  if (k == 0)
    return fail(iss, c == FSF_FSDP ? "R61" : "R62", H_STATE,
                "Could not find a %s model in the provided checkpoint state. Please provide the model as part of the state like so: `%s_checkpoint(..., state={'model': model, ...})`. Make sure you set up the model (and optimizers if any) through the strategy before %s the checkpoint.",
                who, saving ? "save" : "load", saving ? "saving" : "loading");
  if (k > 1) {
    if (c == FSF_FSDP)
      return fail(iss, "R65", H_ONE,
                  "Found multiple FSDP models in the given state. %s checkpoints with FSDP is currently limited to a single model per checkpoint. To %s multiple models, call the %s method for each model separately with a different path.",
                  saving ? "Saving" : "Loading", saving ? "save" : "load", saving ? "save" : "load");
    return fail(iss, "R65", H_ONE, saving
                ? "Found multiple DeepSpeed engine modules in the given state. Saving checkpoints with DeepSpeed is currently limited to a single model per checkpoint. To save multiple models, call the save method for each model separately with a different path."
                : "Found multiple DeepSpeed engine modules in the given state. Saving and loading checkpoints with DeepSpeed is currently limited to a single model per checkpoint. To load multiple model states, call the load method for each model checkpoint separately.");
  }
  return 0;
}

static void sb_key_set(fsV_buf *b, const char *const *keys, size_t n) {
  if (!n) { fsV_buf_printf(b, "set()"); return; }
  fsV_buf_printf(b, "{");
  for (size_t i = 0; i < n; i++) { if (i) fsV_buf_printf(b, ", "); sb_repr_str(b, keys[i]); }
  fsV_buf_printf(b, "}");
}

int fsF_check_save(const fsF_fabric *f, const fsF_entry *st, size_t n,
                   const fsF_filter *flt, fsF_issues *iss) {
  const fsF_config *c = f->cfg;
  int has_filter = flt && flt->kind != FSF_UNSET && flt->kind != FSF_NONE;
  if (has_filter) {
    if (flt->kind != FSF_LIST)
      return fail(iss, "R55", "pass a dict of callables: `filter={\"model\": keep}`",
                  "Filter should be a dictionary, given %s", flt->repr);
    const char **missing = fsA_xrealloc(NULL, (flt->n + 1) * sizeof *missing);
    const char **keys = fsA_xrealloc(NULL, (n + 1) * sizeof *keys);
    size_t nm = 0;
    for (size_t i = 0; i < n; i++) keys[i] = st[i].key;
    for (size_t i = 0; i < flt->n; i++) {
      size_t j = 0;
      while (j < n && strcmp(st[j].key, flt->keys[i])) j++;
      if (j == n) missing[nm++] = flt->keys[i];
    }
    int rc = 0;
    if (nm) {
      fsV_buf a = {0}, b = {0};
      sb_key_set(&a, missing, nm);
      sb_key_set(&b, keys, n);
      char *miss = buf_take(&a), *have = buf_take(&b);
      rc = fail(iss, "R56", "filter only keys of the state", "The filter keys %s are not present in the state keys %s.",
                miss, have);
      free(miss); free(have);
    }
    free(missing); free(keys);
    if (rc) return rc;
    for (size_t i = 0; i < flt->n; i++) {
      if (flt->callable[i]) continue;
      char *k = fsF_repr_str(flt->keys[i]);
      fail(iss, "R57", "map each key to a function `(key, value) -> bool`",
           "Expected `fabric.save(filter=...)` for key %s to be a callable, given %s", k, flt->vrepr[i]);
      free(k);
      return -1;
    }
  }
  if (c->cls == FSF_DEEPSPEED) {
    if (has_filter)
      return fail(iss, "R58", "drop `filter=` under DeepSpeed",
                  "`DeepSpeedStrategy.save_checkpoint(..., filter=...)` is not supported because `DeepSpeedStrategy` manages the state serialization internally.");
    if (sharded_state(f, st, n, 1, iss)) return -1;
    static const char *const internal[] = {
      "module", "buffer_names", "optimizer", "param_shapes", "lr_scheduler",
      "sparse_tensor_module_names", "skipped_steps", "global_steps", "global_samples",
      "dp_world_size", "mp_world_size", "ds_config", "ds_version"};
    fsV_buf b = {0};
    for (size_t i = 0; i < n; i++) {
      if ((st[i].kind == FSF_S_MODEL && st[i].model->wrapped) ||
          (st[i].kind == FSF_S_OPTIM && st[i].optim->wrapped)) continue;
      for (size_t j = 0; j < sizeof internal / sizeof internal[0]; j++)
        if (!strcmp(st[i].key, internal[j])) fsV_buf_printf(&b, "%s%s", b.n ? ", " : "", st[i].key);
    }
    int collide = b.n > 0;
    char *keys = buf_take(&b);
    if (collide)
      warn(iss, "W13", "rename those keys",
           "Your state has keys that collide with DeepSpeed's internal engine state. This could result in your values being overwritten by DeepSpeed. Consider changing the name of these keys to something else: %s",
           keys);
    free(keys);
  }
  if (c->cls == FSF_FSDP) {
    if (has_filter && c->state_dict_sharded)
      return fail(iss, "R59", "use `FSDPStrategy(state_dict_type=\"full\")` or drop `filter=`",
                  "FSDP doesn't support loading sharded filtered checkpoints, so saving them is disabled.");
    if (sharded_state(f, st, n, 1, iss)) return -1;
  }
  if (c->cls == FSF_MP && has_filter && c->save_distributed)
    return fail(iss, "R60", "use `ModelParallelStrategy(..., save_distributed_checkpoint=False)` or drop `filter=`",
                "ModelParallelStrategy doesn't support loading distributed filtered checkpoints, so saving them is disabled.");
  return launched(f, iss);
}

int fsF_check_load(const fsF_fabric *f, const fsF_entry *st, size_t n,
                   int state_is_none, fsF_issues *iss) {
  fsF_cls c = f->cfg->cls;
  if ((c == FSF_FSDP || c == FSF_DEEPSPEED || c == FSF_MP) && (state_is_none || !n))
    return fail(iss, "R63", "pass the objects to restore: `fabric.load(path, {\"model\": model, \"optimizer\": optimizer})`",
                "Got %s.load_checkpoint(..., state=%s) but a state with at least  a model instance to reload is required. Pass it in like so: %s.load_checkpoint(..., state={'model': model, ...})",
                fsF_cls_name(c), state_is_none ? "None" : "{}", fsF_cls_name(c));
  if (sharded_state(f, st, n, 0, iss)) return -1;
  return launched(f, iss);
}

int fsF_check_load_raw(const fsF_fabric *f, int obj_is_optimizer, fsF_issues *iss) {
  if (f->cfg->cls == FSF_FSDP && obj_is_optimizer)
    return fail(iss, "R64", "save and load the optimizer together with the model through `fabric.save`/`fabric.load`",
                "Loading a single optimizer object from a checkpoint is not supported yet with the FSDP strategy.");
  return 0;
}

int fsF_check_mark_forward_method(const fsF_model *m, fsF_vkind x_kind,
                                  const char *name, const char *type_name,
                                  int has_method, fsF_issues *iss) {
  static const char *const H = "mark a method of the set-up model by name: `model.mark_forward_method(\"generate\")`";
  if (!m->wrapped)
    return fail(iss, "R53", "call it on the model returned by `fabric.setup`",
                "'%s' object has no attribute 'mark_forward_method'", m->class_name);
  if (x_kind != FSF_STR)
    return fail(iss, "R51", H, "Expected a method or a string, but got: %s", type_name);
  if (!strcmp(name, "forward"))
    return fail(iss, "R52", "remove the call: `forward` is always a forward method",
                "You cannot mark the forward method itself as a forward method.");
  if (!has_method)
    return fail(iss, "R53", H,
                "You marked '%s' as a forward method, but `%s.%s` does not exist or is not a method.",
                name, m->class_name, name);
  return 0;
}
