/* lib_fabric.c -- the Fabric object: Fabric(...), launch, setup, backward,
 * collectives, logging, to_device.  Every method first runs its validation
 * from fabric.h on the objects' states, so check and run share one rule;
 * checkpoints (save, load) are lib_ckpt.c's. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "config.h"
#include <string.h>

#include "autograd.h"
#include "eval_int.h"
#include "plan.h"
#ifdef FS_HAVE_CUDA
#include "backend_cuda.h"
#endif

/* ---- Fabric ---------------------------------------------------------------------------- */



fsF_fabric *fsE_current_fabric(fsE_ctx *E) {
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fsE_fabric_class) : NULL;
  return fv ? &fv->f : NULL;
}

int fsE_current_rank(fsE_ctx *E) {
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fsE_fabric_class) : NULL;
  return fv ? fv->env.rank : 0;
}

/* The process's GPU: a rank's is its local rank. */
int fsE_cuda_index(fsE_ctx *E) {
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fsE_fabric_class) : NULL;
  return fv ? fv->env.local_rank : 0;
}

int fsE_checkpoint_saved(fabv *fv, const char *path) {
  size_t n = strlen(path);
  char *copy = malloc(n + 1);
  if (!copy) {
    fsV_seterr("out of memory");
    return -1;
  }
  memcpy(copy, path, n + 1);
  free(fv->last_checkpoint);
  fv->last_checkpoint = copy;
  fv->checkpoints++;
  return 0;
}

static void fabv_free(void *p) {
  fabv *fv = p;
  fsE_logger_close(fv->diags, fv->lg, FSLG_CSV);
  if (fv->last_checkpoint && fv->env.rank == 0) /* the run says where its checkpoints went */
    fsD_add(fv->diags, FS_SEV_NOTE, "checkpoint", NULL, (fs_loc){0, 0}, "checkpoint%s: %lld saved, the last to %s",
            fv->checkpoints == 1 ? "" : "s", (long long)fv->checkpoints, fv->last_checkpoint);
  free(fv->last_checkpoint);
  fsV_release(fv->loggers);
  fsV_release(fv->callbacks);
  fsV_release(fv->wrap_policy);
  fsCC_destroy(fv->comm);
  fsV_release(fv->synced);
  fsV_release(fv->planned);
  fsV_release(fv->planned_optim);
  free(fv);
}

fs_value *fsE_comm_fail(void) {
  fsV_seterr("%s", fsT_error()[0] ? fsT_error() : "collective failed");
  return NULL;
}

/* A number of this rank's shards combined over all ranks (ud: the comm):
 * clip_gradients' squared norms (or maxima, inf) under FSDP, and the
 * ShardedGradScaler's found-inf flags (a sum). */
static int shard_norm(void *ud, float *acc, bool inf) {
  return fsCC_all_reduce_host(ud, acc, 1, FS_F32, inf ? FSCC_MAX : FSCC_SUM) == 0 ? 0 : -1;
}

/* launch(): DDP forks the ranks here; this process becomes their supervisor
 * and stops the script with their status, each rank continues it. */
static fs_value *ddp_launch(fsE_ctx *E, fabv *fv) {
  if ((fv->cfg.cls != FSF_DDP && fv->cfg.cls != FSF_FSDP) || fv->comm) return fsV_none();
  if (E->opt->plan) { /* no ranks start; rank 0 sees the world it would (world_size, its loader's batch) */
    fv->env.world_size = fv->cfg.world_size;
    fv->env.local_world_size = fv->cfg.devices;
    return fsV_none();
  }
  fflush(E->out); /* buffered output must not be copied into every rank */
  fflush(stdout);
  fflush(stderr);
  int status = 0;
  fsLN_role role = fsLN_launch(fv->cfg.devices, fv->cfg.num_nodes, &fv->env, &status);
  if (role == FSLN_ERROR) return fsE_comm_fail();
  if (role == FSLN_SUPERVISOR) {
    E->halt = true;
    E->halt_status = status;
    /* the launcher's own word, rendered as the diagnostics are (JSON too) */
    if (status && fsT_error()[0]) fsD_add(E->diags, FS_SEV_ERROR, "launch", NULL, (fs_loc){0, 0}, "%s", fsT_error());
    return NULL;
  }
  if (fv->env.world_size > 1) fsD_set_rank(fv->env.rank);
  bool emulated = fv->dev == FS_DEV_CUDA && E->opt->emulate_cuda;
  fsCC_config cc = {.rank = fv->env.rank, .world = fv->env.world_size, .local_rank = fv->env.local_rank,
                    .emulated_cuda = emulated};
  /* shared memory on one host; across hosts Gloo for cpu ranks (and the
   * emulation's, which are cpu ranks too), NCCL for GPUs */
  fsCC_transport transport = fv->env.local_world_size < fv->env.world_size ? FSCC_GLOO : FSCC_SHM;
#ifdef FS_HAVE_CUDA
  if (fv->dev == FS_DEV_CUDA && !emulated) { /* this rank's GPU, then NCCL among them */
    if (fsCU_select_device(fv->env.local_rank) < 0) return fsE_comm_fail();
    transport = FSCC_NCCL;
  }
#endif
  if (!(fv->comm = fsLN_connect(&fv->env, transport, &cc))) return fsE_comm_fail();
  /* FSDPPrecision("16-mixed") holds a ShardedGradScaler: its inf check is
   * over every rank's shards (DDP's gradients are whole on every rank) */
  if (fv->scaling && fv->cfg.cls == FSF_FSDP) fsO_scaler_shard(&fv->scaler, shard_norm, fv->comm);
  return fsV_none();
}

/* FSDP's joint setup: optimizers over the model's parameters step its flat
 * shards instead (all of them: the shards mix every parameter of a unit). */
static int fsdp_rebind(modv *mv, optv *const *ov, size_t no) {
  fsSH_model *sh = mv->sh;
  for (size_t i = 0; sh && i < no; i++) {
    fs_optim *o = ov[i]->o;
    bool all = o->nparams == sh->nall;
    for (int64_t k = 0; all && k < sh->nall; k++) all = o->params[k] == sh->all[k].t;
    fs_tensor **flats = all ? malloc((size_t)(sh->nunits + 1) * sizeof *flats) : NULL;
    for (int k = 0; flats && k < sh->nunits; k++) flats[k] = sh->units[k].flat;
    int rc = flats ? fsO_replace_params(o, flats, sh->nunits) : -1;
    free(flats);
    if (rc == 0 && fsE_optim_params_swapped(ov[i]) < 0) return -1; /* param_groups show the flat shards */
    if (rc == 0) continue;
    if (all) fsE_rt_fail();
    else fsV_seterr("under FSDP an optimizer set up with the model must hold exactly the model's parameters "
                    "(model.parameters())");
    return -1;
  }
  return 0;
}

/* plan mode: the per-rank input for the activations: x's shape (the
 * script's first call of the model), or one built from the model's first
 * layer, with --batch-size and --context put in.  in->in_rank stays 0 when
 * neither says it. */
static void plan_input(const fsPL_options *o, const fs_module *m, const fs_tensor *x, fsPL_input *in) {
  int64_t batch = o ? o->batch_size : 0, context = o ? o->context : 0;
  if (x) {
    in->in_rank = x->rank < 8 ? x->rank : 8;
    memcpy(in->in_shape, x->shape, (size_t)in->in_rank * sizeof *in->in_shape);
    in->in_bytes = (int)fsT_dtype_size(x->dtype);
    bool tokens = x->dtype == FS_I64 && x->rank >= 2;
    if (batch && x->rank) in->in_shape[0] = batch;
    if (context && tokens) in->in_shape[1] = context;
    in->in_source = batch || (context && tokens) ? "the script's first call of the model, resized by the options"
                                                  : "the script's first call of the model";
    return;
  }
  if (!batch) return;
  for (int i = 0; !context && m->kind == FSM_SEQUENTIAL && i < m->nkids; i++) /* GPT: wpe's context */
    if (m->kids[i]->kind == FSM_POSEMB) context = m->kids[i]->in;
  while (m->nkids && (m->kind == FSM_SEQUENTIAL || m->kind == FSM_REPEAT || m->kind == FSM_RESIDUAL))
    m = m->kids[0];
  if (m->kind == FSM_EMBEDDING) {
    if (!context) return;
    *in = (fsPL_input){.in_rank = 2, .in_shape = {batch, context}, .in_bytes = 8,
                       .in_source = o->context ? "--batch-size and --context" : "--batch-size and the model's context"};
  } else if (m->kind == FSM_LINEAR) {
    *in = (fsPL_input){.in_rank = 2, .in_shape = {batch, m->in}, .in_bytes = 4, .in_source = "--batch-size"};
  }
}

fs_value *fsE_plan_done(fsE_ctx *E, const fs_tensor *x) {
  fabv *fv = E->fabric ? E->fabric->u.obj.data : NULL;
  if (!fv || !fv->planned) {
    fsV_seterr("plan: the script runs a model it has not set up with Fabric (setup or setup_module)");
    return NULL;
  }
  modv *mv = fv->planned->u.obj.data;
  const optv *ov = fv->planned_optim ? fv->planned_optim->u.obj.data : NULL;
  fsF_prec p = fv->cfg.precision;
  fsPL_input in = {0};
  plan_input(E->opt->plan_options, mv->m, x, &in);
  in.strategy = fsF_cls_name(fv->cfg.cls);
  in.accelerator = fsF_accel_name(fv->cfg.accel);
  in.precision = fsF_prec_name(p);
  in.world = fv->cfg.world_size;
  in.devices = fv->cfg.devices;
  in.num_nodes = fv->cfg.num_nodes;
  in.sharded = fv->cfg.cls == FSF_FSDP;
  in.model = mv->m;
  fsE_policy_ud ud = {E, fv->wrap_policy};
  fsSH_policy policy = {fsE_wrap_policy_wraps, &ud};
  in.policy = fv->wrap_policy ? &policy : NULL;
  in.model_class = mv->cls;
  in.optimizer = ov ? ov->cls : NULL;
  in.states = ov ? fsO_state_buffers(ov->o) : 0;
  if (fsPL_print(E->opt->plan, &in, E->opt->plan_options) < 0) return fsE_rt_fail();
  E->halt = true;
  E->halt_status = 0;
  return NULL;
}

int fsE_plan_end(fsE_ctx *E) {
  fabv *fv = E->fabric ? E->fabric->u.obj.data : NULL;
  if (!fv || !fv->planned || fsE_plan_done(E, NULL) || E->halt) return 0;
  fsD_add(E->diags, FS_SEV_ERROR, "runtime", NULL, (fs_loc){0, 0}, "%s", fsV_error());
  return 1;
}

/* FSDP: the last unit's reduce-scatter after backward (ok: it succeeded;
 * else only release what is gathered and keep the backward's error). */
static int fsdp_backward_done(fabv *fv, bool ok) {
  int rc = ok ? 0 : -1;
  for (size_t i = 0; fv->synced && i < fv->synced->u.seq.n; i++) {
    modv *mv = fv->synced->u.seq.items[i]->u.obj.data;
    if (mv->sh && fsSH_backward_done(mv->sh, ok) < 0) rc = -1;
  }
  return rc;
}

/* DDP's broadcast_buffers: torch sends rank 0's buffers (BatchNorm's running
 * statistics) to every rank at the start of each forward; sending them after
 * each backward gives every later forward the same state, without a
 * collective in the forward itself (which eval and generation also run). */
static int ddp_sync_buffers(fabv *fv, modv *mv) {
  fsM_param *ps;
  int64_t n = fsM_state(mv->m, &ps);
  if (n < 0) return fsE_rt_fail(), -1;
  int rc = 0;
  for (int64_t k = 0; rc == 0 && k < n; k++)
    if (ps[k].index >= ps[k].owner->nparams && fsCC_broadcast_tensor(fv->comm, ps[k].t, 0) < 0) rc = -1;
  fsM_params_free(ps, n);
  return rc < 0 ? (fsE_comm_fail(), -1) : 0;
}

/* DDP's gradient all-reduce (mean) after backward, as its reducer does. */
static int ddp_sync_grads(fabv *fv) {
  for (size_t i = 0; fv->comm && fv->synced && i < fv->synced->u.seq.n; i++) {
    modv *mv = fv->synced->u.seq.items[i]->u.obj.data;
    if (!mv->sh && ddp_sync_buffers(fv, mv) < 0) return -1;
  }
  if (!fv->comm || fv->no_sync || !fv->synced) return 0;
  for (size_t i = 0; i < fv->synced->u.seq.n; i++) {
    modv *mv = fv->synced->u.seq.items[i]->u.obj.data;
    if (mv->sh) continue; /* FSDP reduce-scatters per unit */
    fsM_param *ps;
    int64_t n = fsM_parameters(mv->m, &ps);
    if (n < 0) return fsE_rt_fail(), -1;
    int rc = 0;
    for (int64_t k = 0; rc == 0 && k < n; k++)
      if (ps[k].t->grad && (fsCC_all_reduce_tensor(fv->comm, ps[k].t->grad, FSCC_MEAN) < 0 ||
                             fsG_round_grad(ps[k].t) < 0)) rc = -1; /* the mean in the gradient's type */
    fsM_params_free(ps, n);
    if (rc < 0) return fsE_comm_fail(), -1;
  }
  return 0;
}

/* A copy of x (a tensor, or a number as a 0-d tensor: float32 for a float,
 * int64 for an int or a bool, where Fabric makes int32 and uint8, dtypes this
 * runtime lacks) where the communicator's buffers live. */
static fs_tensor *collective_input(const fs_value *x, fs_device dev) {
  fs_tensor *t = fsE_as_tensor(x);
  if (t) return t->device == dev ? fsT_copy(t) : fsT_to_device(t, dev);
  if (!fsV_is_number(x)) {
    fsT_seterr("collectives take a tensor or a number, not %s", fsV_type_name(x));
    return NULL;
  }
  fs_tensor *s = fsT_new(x->type == FSV_FLOAT ? FS_F32 : FS_I64, FS_DEV_CPU, 0, NULL);
  if (!s) return NULL;
  if (x->type == FSV_FLOAT) fsT_f32(s)[0] = (float)x->u.f;
  else fsT_i64(s)[0] = fsE_ival(x);
  fs_tensor *d = fsT_to_device(s, dev);
  fsT_release(s);
  return d;
}

static fs_value *collective(fabv *fv, const char *name, fs_value **s) {
  if (strcmp(name, "barrier") == 0) return !fv->comm || fsCC_barrier(fv->comm) == 0 ? fsV_none() : fsE_comm_fail();
  bool reduce = strcmp(name, "broadcast") != 0;
  /* one rank: the identity, but all_reduce and all_gather convert numbers to
   * tensors first on any world size (Fabric's convert_to_tensors) */
  if (!fv->comm && (!reduce || fsE_as_tensor(s[0]) || !fsV_is_number(s[0]))) return fsV_retain(s[0]);
  fs_tensor *t = collective_input(s[0], fv->comm ? fv->comm->device : fv->dev);
  if (!fv->comm) return t ? fsE_tensor_value(t) : fsE_rt_fail();
  if (!t) return fsE_rt_fail();
  int rc = 0;
  if (strcmp(name, "all_reduce") == 0) {
    int op = fsCC_op_parse(s[2]->u.str.s);
    if (op < 0) {
      fsT_release(t);
      fsV_seterr("Unsupported reduce_op '%s'", s[2]->u.str.s);
      return NULL;
    }
    rc = fsCC_all_reduce_tensor(fv->comm, t, (fsCC_op)op);
  } else if (strcmp(name, "broadcast") == 0) {
    rc = fsCC_broadcast_tensor(fv->comm, t, (int)fsE_ival(s[1]));
  } else { /* all_gather: a new leading dimension of world */
    fs_tensor *g = fsCC_all_gather_tensor(fv->comm, t);
    fsT_release(t);
    if (!g) return fsE_comm_fail();
    t = g;
  }
  if (rc < 0) {
    fsT_release(t);
    return fsE_comm_fail();
  }
  if (!reduce && !fsE_as_tensor(s[0])) { /* broadcast_object_list: a number in, a number out */
    fs_value *r = fsE_item_value(t);
    fsT_release(t);
    return r;
  }
  return fsE_tensor_value(t);
}

/* fabric.log / log_dict: names[i] = values[i] to every logger of
 * Fabric(loggers=...), or with none given to fabric.log's default, a CSV
 * logger under logs/ (made at the first call). */
static fs_value *log_metrics(fsE_ctx *E, fabv *fv, fs_value *const *names, fs_value *const *values,
                            size_t n, const fs_value *step) {
  if (!fv->loggers && !fv->lg && !(fv->lg = fsLG_new(&(fsLG_where){.root = "logs", .format = FSLG_CSV}))) {
    fsV_seterr("out of memory");
    return NULL;
  }
  return fsE_log_metrics(E, &fv->lg, fv->loggers, names, values, n, step) < 0 ? NULL : fsV_none();
}

/* Reports the issues of a validation: warnings as diagnostics, the error via fsV_error. */
/* Where an issue points: the argument it is about (as the checker puts it)
 * where the call is a written `fabric.method(...)`, else the call. */
static fs_loc issue_loc(fsE_ctx *E, const fsV_args *a, const fsF_issue *s) {
  const fs_node *call = E->call;
  if (!s || !s->arg || !call || call->loc.start != a->loc.start || call->loc.end != a->loc.end ||
      call->kids[0]->kind != FS_N_ATTR)
    return a->loc;
  return fsSig_arg_loc(fsSig_member("Fabric", call->kids[0]->str), call, s->arg, s->arg_index);
}

int fsE_fabric_issues(fsE_ctx *E, const fsV_args *a, fsF_issues *iss, int rc) {
  for (size_t i = 0; i < iss->n; i++)
    if (iss->items[i].severity != FS_SEV_ERROR) {
      fs_diag *g = fsD_add(E->diags, iss->items[i].severity, iss->items[i].rule, E->src, issue_loc(E, a, &iss->items[i]), "%s",
                           iss->items[i].message);
      if (iss->items[i].help) fsD_help(g, "%s", iss->items[i].help);
    }
  if (rc < 0) {
    const fsF_issue *e = fsF_error(iss);
    fsV_seterr("%s", e ? e->message : "Fabric rejected the call");
    fs_diag *g = fsD_add(E->diags, FS_SEV_ERROR, e ? e->rule : "runtime", E->src, issue_loc(E, a, e), "%s",
                         e ? e->message : "Fabric rejected the call");
    if (e && e->help) fsD_help(g, "%s", e->help);
    E->reported = true;
    if (!E->status) E->status = 1;
  }
  fsF_issues_free(iss);
  return rc;
}

/* An fs_value as fabric.h sees a Fabric(...) argument. */
static fsF_value fvalue(const fs_value *v, int64_t *ints, size_t cap, char **repr) {
  fsF_value f = {.kind = FSF_OTHER, .tname = fsV_type_name(v)};
  switch (v->type) {
  case FSV_NONE: f.kind = FSF_NONE; break;
  case FSV_BOOL: f.kind = FSF_BOOL; f.i = v->u.b; break;
  case FSV_INT: f.kind = FSF_INT; f.i = v->u.i; break;
  case FSV_FLOAT: f.kind = FSF_FLOAT; f.f = v->u.f; break;
  case FSV_STR: f.kind = FSF_STR; f.s = v->u.str.s; break;
  case FSV_LIST:
  case FSV_TUPLE:
    f.kind = FSF_INTLIST;
    f.tuple = v->type == FSV_TUPLE;
    for (size_t i = 0; i < v->u.seq.n; i++) {
      const fs_value *x = v->u.seq.items[i];
      if (x->type != FSV_INT || i >= cap) {
        f.kind = FSF_LIST;
        f.tname = fsV_type_name(x);
        break;
      }
      ints[i] = x->u.i;
    }
    f.ints = ints;
    f.nints = v->u.seq.n;
    break;
  default:
    if (fsV_objdata(v, &fsE_strategy_class)) {
      f.kind = FSF_STRATEGY;
      f.strategy = *(fsF_strategy_obj *)v->u.obj.data;
    }
    break;
  }
  if (f.kind == FSF_LIST || f.kind == FSF_OTHER) f.s = *repr = fsV_repr(v);
  return f;
}

/* raisesA: the plugin Fabric's connector looks at first (fsF_args.plugin):
 * plugins= itself when not iterable, else its first item; a str's first
 * character goes to ch (8 bytes). */
static fsF_value first_plugin(const fs_value *v, char *ch, int64_t *ints, char **repr) {
  fsF_value none = {.kind = FSF_UNSET};
  if (v->type == FSV_NONE) return none;
  if (v->type == FSV_LIST || v->type == FSV_TUPLE) /* raisesD: a plugin object is of a valid type */
    return v->u.seq.n && !fsE_is_plugin(v->u.seq.items[0]) ? fvalue(v->u.seq.items[0], ints, FSF_MAX_GPUS, repr) : none;
  if (fsE_is_plugin(v)) return none;
  if (v->type == FSV_DICT)
    return v->u.dict.n ? fvalue(v->u.dict.keys[0], ints, FSF_MAX_GPUS, repr) : none;
  if (v->type == FSV_STR) {
    size_t n = v->u.str.len ? 1 : 0;
    while (n && n < 4 && ((unsigned char)v->u.str.s[n] & 0xC0) == 0x80) n++;
    if (!n) return none;
    memcpy(ch, v->u.str.s, n);
    ch[n] = 0;
    return (fsF_value){.kind = FSF_STR, .s = ch};
  }
  return fvalue(v, ints, FSF_MAX_GPUS, repr);
}

/* Whether this machine runs cfg (fsF_check_runnable said this build does):
 * cuda on the GPUs of a CUDA build, or emulated by the cpu backend
 * (--emulate-cuda); one node, or several started by torchrun or srun.
 * Nothing here initializes CUDA: ranks are forked later. */
static int runnable(const fsF_config *cfg, bool emulate_cuda) {
  fsF_machine here;
  fsF_machine_detect(&here);
#ifdef FS_HAVE_CUDA
  bool gpus = here.cuda_gpus > 0;
#else
  bool gpus = false;
#endif
  if (cfg->accel == FSF_CUDA && !emulate_cuda && !gpus) {
    fsV_seterr("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
               "installed a driver from http://www.nvidia.com/Download/index.aspx (to try a cuda script "
               "on this machine, run it with --emulate-cuda: the cpu backend, one process per rank)");
    return -1;
  }
  if (cfg->num_nodes == 1) return 0;
  /* across nodes (shared memory reaches one host only): Gloo between cpu
   * ranks, emulated cuda's included, started on every node by torchrun,
   * srun or this launcher (NODE_RANK, MASTER_PORT); NCCL between GPUs,
   * started by torchrun or srun */
  fsLN_env env;
  int outside = fsLN_detect(&env);
  if (outside == 0) outside = fsLN_node_env(cfg->devices, cfg->num_nodes, &env) < 0 ? -1 : 0;
  if (outside < 0) {
    fsV_seterr("%s", fsT_error());
    return -1;
  }
  if (cfg->accel == FSF_CUDA && !emulate_cuda && !outside) {
    fsV_seterr("num_nodes=%d on GPUs needs the ranks started on every node by torchrun or srun",
               cfg->num_nodes);
    return -1;
  }
  if (outside && env.world_size != cfg->world_size) {
    fsV_seterr("the launcher started %d ranks, but the script asks for %d (num_nodes=%d x devices=%d)",
               env.world_size, cfg->world_size, cfg->num_nodes, cfg->devices);
    return -1;
  }
  return 0;
}

/* Fabric(callbacks=..., loggers=...): None is [] (loggers: NULL, fabric.log's default),
 * a list stays, anything else is a list of it; each a `cls` when given. */
static int as_list(fs_value *v, fs_value **out, const fsV_class *cls) {
  *out = NULL;
  if (v->type == FSV_NONE && cls) return 0;
  fs_value *l = v->type == FSV_LIST ? fsV_retain(v) : fsV_list(1);
  if (l && v->type != FSV_LIST && v->type != FSV_NONE && fsV_list_append(l, fsV_retain(v)) < 0) l = NULL;
  for (size_t i = 0; l && cls && i < l->u.seq.n; i++)
    if (!fsV_objdata(l->u.seq.items[i], cls)) {
      fsV_seterr("Fabric(loggers=...): this build's loggers are CSVLogger and TensorBoardLogger, not %s",
                 fsV_type_name(l->u.seq.items[i]));
      fsV_release(l);
      return -1;
    }
  *out = l;
  return l ? 0 : -1;
}

NATIVE(f_fabric) {
  const fsE_options *o = E->opt;
  fsF_overrides ov = {o->accelerator, o->strategy, o->devices, o->num_nodes, o->precision};
  fsF_machine m;
  if (o->machine) m = *o->machine; /* the check's machine: the same resolution */
  else fsF_machine_detect(&m);
  fs_value *const *slot[5] = {&s[0], &s[1], &s[2], &s[3], &s[4]};
  fsF_args fa;
  fsF_value *dst[5] = {&fa.accelerator, &fa.strategy, &fa.devices, &fa.num_nodes, &fa.precision};
  int64_t ints[5][FSF_MAX_GPUS];
  char *reprs[5] = {0};
  for (int i = 0; i < 5; i++) {
    *dst[i] = fvalue(*slot[i], ints[i], FSF_MAX_GPUS, &reprs[i]);
    /* an argument left at its default is "not passed", as the CLI rules need */
    bool given = false;
    for (size_t k = 0; k < a->nkw; k++) given |= fsSig_param_index(fsSig_find("Fabric"), a->kwnames[k]) == i;
    if (!given && (size_t)i >= a->npos) dst[i]->kind = FSF_UNSET;
  }
  char plugin_ch[8], *plugin_repr = NULL;
  int64_t plugin_ints[FSF_MAX_GPUS];
  fa.plugin = first_plugin(s[5], plugin_ch, plugin_ints, &plugin_repr);
  fsE_plugins_args(s[5], &fa);
  char *declared = NULL; /* the check said so in its note */
  fsF_machine d;
  if (o->plan && o->preflight && fsF_declared_machine(&fa, &ov, &m, &d, &declared)) m = d;
  free(declared);
  fabv *fv = calloc(1, sizeof *fv);
  fsF_issues iss;
  fsF_issues_init(&iss);
  int rc = fv ? fsF_resolve(&fa, &ov, &m, &fv->cfg, &iss) : -1;
  for (int i = 0; i < 5; i++) free(reprs[i]);
  free(plugin_repr);
  if (!fv) {
    fsF_issues_free(&iss);
    fsV_seterr("out of memory");
    return NULL;
  }
  if (fsE_fabric_issues(E, a, &iss, rc) < 0) {
    free(fv);
    return NULL;
  }
  fsF_issues_init(&iss);
  if (!o->plan && (fsE_fabric_issues(E, a, &iss, fsF_check_runnable(&fv->cfg, &iss)) < 0 ||
                   fsE_check_plugins(E, a, s[5]) < 0 || runnable(&fv->cfg, o->emulate_cuda) < 0)) { /* plan allocates nothing: any target */
    free(fv);
    return NULL;
  }
  fsF_fabric_init(&fv->f, &fv->cfg);
  /* MixedPrecision("16-mixed") makes a GradScaler (on CPU the precision
   * became bf16-mixed, W8), FSDPPrecision a ShardedGradScaler (made
   * sharded at launch, when its process group exists) */
  if ((fv->scaling = fv->cfg.precision == FSF_P16_MIXED)) fsO_scaler_init(&fv->scaler);
  fv->dev = fv->cfg.accel == FSF_CUDA && !o->plan ? FS_DEV_CUDA : FS_DEV_CPU; /* plan: shapes only */
  if (fv->dev == FS_DEV_CUDA && o->emulate_cuda) fsB_emulate_cuda();
#ifdef FS_HAVE_CUDA
  /* one process, one GPU; DDP and FSDP ranks pick theirs after launch() */
  else if (fv->dev == FS_DEV_CUDA && fv->cfg.cls == FSF_SINGLE && fsCU_select_device(0) < 0) {
    free(fv);
    return fsE_rt_fail();
  }
#endif
  fv->diags = E->diags;
  /* the connector's _set_world_ranks(): the world before launch() (this process: rank 0) */
  bool ranks = fv->cfg.cls == FSF_DDP || fv->cfg.cls == FSF_FSDP;
  fv->env.world_size = ranks ? fv->cfg.world_size : 1;
  fv->env.local_world_size = ranks ? fv->cfg.devices : 1;
  if (as_list(s[6], &fv->callbacks, NULL) < 0 || as_list(s[7], &fv->loggers, &fsE_logger_class) < 0) {
    fsV_release(fv->callbacks);
    free(fv);
    return NULL;
  }
  if (fsE_strategy_wrap_policy(s[1])) fv->wrap_policy = fsV_retain(fsE_strategy_wrap_policy(s[1]));
  fs_value *r = fsV_obj(&fsE_fabric_class, fv);
  if (r) {
    fsV_release(E->fabric);
    E->fabric = fsV_retain(r);
  }
  /* under `fabric run` (LT_CLI_USED=1) Fabric(...) sets up the processes
   * torchrun started: here the ranks are forked at this point, each going
   * on from it, as each of the CLI's processes would reach it */
  fs_value *started = r && fv->cfg.under_cli && !o->plan ? ddp_launch(E, fv) : r ? fsV_none() : NULL;
  if (!started) {
    fsV_release(r);
    return NULL;
  }
  fsV_release(started);
  return r;
}

/* Tuples of the arguments Fabric returns: one value alone, several as a tuple. */
static fs_value *one_or_tuple(fs_value *first, fs_value *rest) {
  size_t n = (first ? 1 : 0) + rest->u.seq.n;
  if (n == 1) return fsV_retain(first ? first : rest->u.seq.items[0]);
  fs_value *t = fsV_tuple(n);
  for (size_t i = 0; t && i < n; i++)
    fsV_seq_set(t, i, fsV_retain(first ? (i ? rest->u.seq.items[i - 1] : first) : rest->u.seq.items[i]));
  return t;
}

static modv *need_module(const fs_value *v, const char *fn) {
  modv *mv = fsV_objdata(v, &fsE_module_class);
  if (!mv) fsV_seterr("%s(): expected a module, got %s", fn, fsV_type_name(v));
  return mv;
}

/* The optimizers' states; a value that is no optimizer gets a state in
 * foreign[i] naming its type, for Fabric's own refusal (R76). */
static void gather_optims(const fs_value *opts, const fsF_optim **st, optv **ov, fsF_optim *foreign) {
  for (size_t i = 0; i < opts->u.seq.n; i++) {
    if ((ov[i] = fsV_objdata(opts->u.seq.items[i], &fsE_optim_class))) {
      st[i] = &ov[i]->st;
    } else {
      foreign[i] = (fsF_optim){.foreign = fsV_type_name(opts->u.seq.items[i])};
      st[i] = &foreign[i];
    }
  }
}

/* Where Fabric let a value that is no optimizer through (a joint setup
 * outside FSDP), this runtime cannot wrap it. */
static int foreign_left(optv *const *ov, const fs_value *opts, const char *fn) {
  for (size_t i = 0; opts && i < opts->u.seq.n; i++)
    if (!ov[i]) {
      fsV_seterr("%s(): expected an optimizer, got %s", fn, fsV_type_name(opts->u.seq.items[i]));
      return -1;
    }
  return 0;
}

/* What a successful setup of a module does: materialize it, mark it set up.
 * move: setup's move_to_device (fabric.py: `if move_to_device:
 * _move_model_to_device`); false leaves the parameters, and the module's
 * device, where they are. FSDP places its shards on the device either way
 * (FSDPStrategy passes device_id), and meta parameters materialize there. */
static int setup_module_done(fsE_ctx *E, fabv *fv, fs_value *v, modv *mv, bool move) {
  if (move || mv->st.meta || fv->cfg.cls == FSF_FSDP) mv->dev = fv->dev;
  if (E->opt->plan) { /* nothing to materialize: remember the model */
    fsV_release(fv->planned);
    fv->planned = fsV_retain(v);
    fsF_setup_done(&fv->f, &mv->st);
    mv->st.meta = false;
    return 0;
  }
  if (fv->cfg.cls == FSF_FSDP) { /* each rank materializes only its shards */
    fsE_policy_ud ud = {E, fv->wrap_policy};
    fsSH_policy policy = {fsE_wrap_policy_wraps, &ud};
    if (!(mv->sh = fsSH_wrap(mv->m, fv->wrap_policy ? &policy : NULL, fv->comm, fv->dev, E->seed)))
      return fsE_rt_fail(), -1;
    /* FSDPPrecision("16-mixed"): MixedPrecision(reduce_dtype=float16) */
    if (fv->cfg.precision == FSF_P16_MIXED) mv->sh->reduce_dtype = FS_F16;
    if (!fv->synced && !(fv->synced = fsV_list(0))) return -1;
    if (fsV_list_append(fv->synced, fsV_retain(v)) < 0) return -1;
    fsF_setup_done(&fv->f, &mv->st);
    mv->st.meta = false;
    return 0;
  }
  if ((mv->st.meta && fsM_materialize(mv->m, fv->dev, E->seed) < 0) || (move && fsM_to_device(mv->m, fv->dev) < 0))
    return fsE_rt_fail(), -1;
  if (fv->comm) { /* DDP: every rank starts from rank 0's parameters and buffers */
    fsM_param *ps;
    int64_t n = fsM_state(mv->m, &ps);
    if (n < 0) return fsE_rt_fail(), -1;
    int rc = 0;
    for (int64_t i = 0; rc == 0 && i < n; i++) rc = fsCC_broadcast_tensor(fv->comm, ps[i].t, 0);
    fsM_params_free(ps, n);
    if (rc < 0) return fsE_comm_fail(), -1;
    if (!fv->synced && !(fv->synced = fsV_list(0))) return -1;
    if (fsV_list_append(fv->synced, fsV_retain(v)) < 0) return -1;
  }
  /* *-true: module.to(dtype) (lib_precision.c) */
  fs_dtype pd = fsE_precision_param_dtype(&fv->cfg);
  if (pd != FS_F32 && fsM_to_dtype(mv->m, pd) < 0) return fsE_rt_fail(), -1;
  fsF_setup_done(&fv->f, &mv->st);
  mv->st.meta = fsE_has_meta(mv->m);
  return 0;
}

/* The FSDP model whose flat shards o steps, or NULL. */
fsSH_model *fsE_sharded_of(fabv *fv, const fs_optim *o) {
  for (size_t i = 0; fv->synced && i < fv->synced->u.seq.n; i++) {
    fsSH_model *sh = ((modv *)fv->synced->u.seq.items[i]->u.obj.data)->sh;
    bool same = sh && sh->nunits == o->nparams;
    for (int k = 0; same && k < sh->nunits; k++) same = sh->units[k].flat == o->params[k];
    if (same) return sh;
  }
  return NULL;
}

/* Fabric's move_data_to_device (apply_to_collection): the tensors of
 * (nested) lists, tuples and dicts move in new containers (a tensor already
 * on dev is itself, as tensor.to returns it), a module moves in place (as
 * module.to), anything else is returned as is.  fabric.to_device and the
 * set-up data loaders' batches (lib_data.c) both move through it. */
static fs_value *move_to_device(fs_value *v, fs_device dev, int depth) {
  fs_tensor *t = fsE_as_tensor(v);
  modv *mv = fsV_objdata(v, &fsE_module_class);
  if (t) return t->device == dev ? fsV_retain(v) : fsE_tensor_value(fsT_to_device(t, dev));
  if (mv && !mv->sh) { /* an FSDP model's shards are placed already */
    if (fsM_to_device(mv->m, dev) < 0) return fsE_rt_fail();
    mv->dev = dev;
  }
  if (mv) return fsV_retain(v);
  if (v->type != FSV_LIST && v->type != FSV_TUPLE && v->type != FSV_DICT) return fsV_retain(v);
  if (depth >= FS_MAX_DEPTH) {
    fsV_seterr("to_device(): the collection is nested more than %d deep", FS_MAX_DEPTH);
    return NULL;
  }
  bool dict = v->type == FSV_DICT;
  size_t n = dict ? v->u.dict.n : v->u.seq.n;
  fs_value *r = dict ? fsV_dict() : v->type == FSV_LIST ? fsV_list(n) : fsV_tuple(n);
  if (!r) return fsE_err_own(NULL);
  for (size_t i = 0; i < n; i++) {
    fs_value *x = move_to_device(dict ? v->u.dict.vals[i] : v->u.seq.items[i], dev, depth + 1);
    int rc = !x ? -1 : dict ? fsV_dict_set(r, v->u.dict.keys[i], x)
                   : v->type == FSV_LIST ? fsV_list_append(r, x) : (fsV_seq_set(r, i, x), 0);
    if (rc < 0) {
      fsV_release(r);
      return NULL;
    }
  }
  return r;
}

fs_value *fsE_to_device(fs_value *v, fs_device dev) { return move_to_device(v, dev, 0); }

/* ---- methods and attributes (rows of the sig table's "Fabric." entries) ----
 * Each method runs its rule from fabric.h on the objects' states first
 * (fsE_fabric_issues reports what it found), then its effect. */

#define FABV(self) ((fabv *)(self)->u.obj.data)

/* launch(function, *args, **kwargs): the ranks start (popen: each continues
 * the script), then every rank runs function(fabric, *args, **kwargs) and
 * gets its result, as Fabric's _wrap_and_launch does with no launcher of
 * its own in the process. */
NATIVE(fabric_launch) {
  fabv *fv = FABV(self);
  fs_value *fn = s[0];
  fsF_fn kind = fn->type == FSV_NONE ? FSF_FN_NONE : fsE_callable_sig(fn) ? FSF_FN_CALLABLE : FSF_FN_NOT_CALLABLE;
  const fsSig *sig = kind == FSF_FN_CALLABLE ? fsE_callable_sig(fn) : NULL;
  char *str_of = kind == FSF_FN_NOT_CALLABLE ? fsV_tostr(fn) : NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  int rc = fsF_check_launch(&fv->f, kind, str_of ? str_of : "?", sig ? sig->name : "function",
                            sig ? (int)sig->nparams : 1, &iss);
  free(str_of);
  if (fsE_fabric_issues(E, a, &iss, rc) == 0) r = ddp_launch(E, fv);
  if (!r || kind == FSF_FN_NONE) return r;
  fsV_release(r);
  size_t np = 1 + s[1]->u.seq.n, nk = s[2]->u.dict.n;
  fs_value **pos = malloc(np * sizeof *pos);
  const char **kwnames = malloc((nk + 1) * sizeof *kwnames);
  if (!pos || !kwnames) {
    free(pos);
    free(kwnames);
    fsV_seterr("out of memory");
    return NULL;
  }
  pos[0] = self;
  for (size_t i = 1; i < np; i++) pos[i] = s[1]->u.seq.items[i - 1];
  for (size_t i = 0; i < nk; i++) kwnames[i] = s[2]->u.dict.keys[i]->u.str.s;
  fsV_args call = {pos, np, kwnames, s[2]->u.dict.vals, nk, a->loc};
  r = fsE_call(E, fn, &call);
  free(pos);
  free(kwnames);
  return r;
}

/* Fabric's seed_everything (utilities/seed.py): None reads PL_GLOBAL_SEED
 * (unset: 0, with its warning), the bounds are numpy's, and the seed is
 * left in PL_GLOBAL_SEED for what the process starts later. */
NATIVE(fabric_seed_everything) {
  int64_t seed = s[0]->type == FSV_NONE ? 0 : fsE_ival(s[0]);
  if (s[0]->type == FSV_NONE) {
    const char *env = getenv("PL_GLOBAL_SEED");
    char *end = NULL;
    long long v = env ? strtoll(env, &end, 10) : 0;
    if (!env) {
      fsD_add(E->diags, FS_SEV_WARNING, "seed", E->src, a->loc, "No seed found, seed set to 0");
    } else if (!*env || *end) { /* Python's int(): digits, an optional sign, blanks around */
      fs_value *str = fsV_cstr(env);
      char *r = str ? fsV_repr(str) : NULL;
      fsV_seterr("ValueError: Invalid seed specified via PL_GLOBAL_SEED: %s", r ? r : env);
      free(r);
      fsV_release(str);
      return NULL;
    }
    seed = v;
  }
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (fsE_fabric_issues(E, a, &iss, fsF_check_seed(seed, &iss)) < 0) return NULL;
  char text[24];
  snprintf(text, sizeof text, "%lld", (long long)seed);
  setenv("PL_GLOBAL_SEED", text, 1);
  E->seed = (uint64_t)seed;
  E->samples = 0; /* sampling and rand/randn start over, as torch's generator does */
  E->drawn = 0;   /* (even when the seed is the one already set) */
  return fsV_int(seed);
}

NATIVE(fabric_init_module) {
  fabv *fv = FABV(self);
  int ei = s[0]->type == FSV_NONE ? -1 : fsV_truthy(s[0]);
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  if (fsE_fabric_issues(E, a, &iss, fsF_check_init_module(&fv->f, ei, &iss)) == 0)
    r = fsE_make_ctx(2, fsF_init_module_effect(&fv->cfg, ei) == FSF_INIT_META ? FS_DEV_META : fv->dev);
  if (r) fsE_precision_ctx(r->u.obj.data, &fv->cfg, false);
  fsF_issues_free(&iss);
  return r;
}

/* raisesD: sharded_model(): W6, the launch check, then a context that does
 * nothing (Fabric's enable_wrap affects only explicit wrap() calls). */
NATIVE(fabric_sharded_model) {
  (void)s;
  fabv *fv = FABV(self);
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (fsE_fabric_issues(E, a, &iss, fsF_check_sharded_model(&fv->f, &iss)) < 0) return NULL;
  return fsE_make_ctx(3, fv->dev);
}

/* fsdp.py's _warn_if_shared_params_across_fsdp_units before FSDP wraps m
 * under a ModuleWrapPolicy (classes): each parameter of the state dict
 * (a tied one under each name) with the nearest module above it that one of
 * the classes wraps, the root excluded (W21). */
static int shared_params_across_units(fsE_ctx *E, const fsV_args *a, fs_module *m, const fs_value *classes) {
  fsM_param *ps;
  int64_t n = fsM_state(m, &ps);
  if (n < 0) return fsE_rt_fail(), -1;
  fsF_param_site *sites = calloc((size_t)(n ? n : 1), sizeof *sites);
  char **units = calloc((size_t)(n ? n : 1), sizeof *units);
  size_t ns = 0;
  int rc = sites && units ? 0 : -1;
  for (int64_t i = 0; rc == 0 && i < n; i++) {
    if (ps[i].index >= ps[i].owner->nparams) continue; /* a buffer */
    const char *name = ps[i].name, *dot;
    size_t unit_len = 0;
    fs_module *cur = m;
    for (const char *c = name; cur && (dot = strchr(c, '.')); c = dot + 1) {
      fs_module *kid = NULL;
      for (int k = 0; k < cur->nkids && !kid; k++)
        if (strlen(cur->kids[k]->key) == (size_t)(dot - c) && !strncmp(cur->kids[k]->key, c, (size_t)(dot - c)))
          kid = cur->kids[k];
      if ((cur = kid) && fsE_module_is_one_of(kid, classes)) unit_len = (size_t)(dot - name);
    }
    if (!(units[ns] = strndup(name, unit_len))) rc = -1;
    else sites[ns] = (fsF_param_site){ps[i].t, name, units[ns]}, ns++;
  }
  if (rc == 0) {
    fsF_issues iss;
    fsF_issues_init(&iss);
    fsF_warn_shared_params(sites, ns, &iss);
    fsE_fabric_issues(E, a, &iss, 0);
  } else {
    fsV_seterr("out of memory");
  }
  for (size_t i = 0; units && i < ns; i++) free(units[i]);
  free(units);
  free(sites);
  fsM_params_free(ps, n);
  return rc;
}

/* torch's str(param.device): "cuda:<this process's GPU>" for CUDA. */
static const char *device_str(fsE_ctx *E, fs_device d, char *buf, size_t cap) {
  if (d != FS_DEV_CUDA) return fsT_device_name(d);
  snprintf(buf, cap, "cuda:%d", fsE_cuda_index(E));
  return buf;
}

/* W4's facts into mv->st (fabric.py:1130): the parameters not on the first
 * one's device. The names point into *ps (the caller frees it, and clears
 * the facts, once the setup's issues are out); -1 when out of memory. */
static int64_t devices_apart(fsE_ctx *E, modv *mv, fsM_param **ps, char devs[2][24]) {
  int64_t n = fsM_parameters(mv->m, ps);
  if (n < 0) return fsE_rt_fail(), -1;
  for (int64_t i = 1; i < n; i++)
    if ((*ps)[i].t->device != (*ps)[0].t->device && !mv->st.devices_apart++) {
      mv->st.apart_name = (*ps)[i].name;
      mv->st.apart_device = device_str(E, (*ps)[i].t->device, devs[0], sizeof devs[0]);
      mv->st.first_name = (*ps)[0].name;
      mv->st.first_device = device_str(E, (*ps)[0].t->device, devs[1], sizeof devs[1]);
    }
  return n;
}

/* setup(module, *optimizers), setup_module(module), setup_optimizers(*optimizers):
 * module is NULL for the last, opts NULL for setup_module; move, their
 * move_to_device. */
static fs_value *setup(fsE_ctx *E, fabv *fv, fs_value *module, fs_value *opts, bool move, const char *name,
                       const fsV_args *a) {
  modv *mv = module ? need_module(module, name) : NULL;
  /* Whether the model is on the meta device, from its tensors: a layer a
   * script class's __init__ made (`net.head`) was a value while its
   * parameters waited for the tree's initial values, and its own fact stayed
   * "meta" after they came. A plan keeps everything on meta (its fact is
   * where the model would be). */
  if (mv && !E->opt->plan) mv->st.meta = fsE_has_meta(mv->m);
  fsM_param *ps = NULL;
  char devs[2][24];
  int64_t nps = mv && move && !mv->st.wrapped ? devices_apart(E, mv, &ps, devs) : 0;
  if (nps < 0) return NULL;
  size_t no = opts ? opts->u.seq.n : 0;
  const fsF_optim **st = calloc(no + 1, sizeof *st);
  optv **ov = calloc(no + 1, sizeof *ov);
  fsF_optim *foreign = calloc(no + 1, sizeof *foreign);
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  int rc = -1;
  if (!st || !ov || !foreign) fsV_seterr("out of memory");
  else if (mv || !module) {
    if (opts) gather_optims(opts, st, ov, foreign);
    rc = fsE_fabric_issues(E, a, &iss, !module ? fsF_check_setup_optimizers(&fv->f, st, no, &iss)
                                       : opts ? fsF_check_setup(&fv->f, &mv->st, st, no, &iss)
                                              : fsF_check_setup_module(&fv->f, &mv->st, &iss));
    if (rc == 0) rc = foreign_left(ov, opts, name);
    /* FSDP's setup_module warns before it wraps (W21) */
    if (rc == 0 && mv && fv->cfg.cls == FSF_FSDP && fv->wrap_policy && fv->wrap_policy->type == FSV_LIST)
      rc = shared_params_across_units(E, a, mv->m, fv->wrap_policy);
  }
  if (rc == 0 && (!module || (setup_module_done(E, fv, module, mv, move) == 0 && fsdp_rebind(mv, ov, no) == 0))) {
    for (size_t i = 0; i < no; i++) fsF_setup_optim_done(&ov[i]->st);
    if (E->opt->plan && no && !fv->planned_optim) fv->planned_optim = fsV_retain(opts->u.seq.items[0]);
    r = !opts ? fsV_retain(module) : no || module ? one_or_tuple(module, opts) : fsV_none();
  }
  fsF_issues_free(&iss);
  free(st);
  free(ov);
  free(foreign);
  if (mv) mv->st.devices_apart = 0;
  fsM_params_free(ps, nps);
  return r;
}

NATIVE(fabric_setup) { return setup(E, FABV(self), s[0], s[1], fsV_truthy(s[2]), "setup", a); }
NATIVE(fabric_setup_module) { return setup(E, FABV(self), s[0], NULL, fsV_truthy(s[1]), "setup_module", a); }
NATIVE(fabric_setup_optimizers) { return setup(E, FABV(self), NULL, s[0], false, "setup_optimizers", a); }

/* slots: dataloaders (tuple), use_distributed_sampler, move_to_device */
NATIVE(fabric_setup_dataloaders) {
  fabv *fv = FABV(self);
  size_t n = s[0]->u.seq.n;
  fsF_loader *sts = calloc(n + 1, sizeof *sts);
  const fsF_loader **p = calloc(n + 1, sizeof *p);
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  if (!sts || !p) fsV_seterr("out of memory");
  else {
    for (size_t i = 0; i < n; i++) {
      loaderv *lv = fsV_objdata(s[0]->u.seq.items[i], &fsE_loader_class);
      sts[i] = lv ? lv->st : (fsF_loader){0};
      p[i] = &sts[i];
    }
    int rc = fsF_check_setup_dataloaders(&fv->f, p, n, &iss);
    for (size_t i = 0; rc == 0 && fsV_truthy(s[1]) && i < n; i++)
      rc = fsF_check_distributed_sampler(&fv->f, p[i], &iss);
    if (fsE_fabric_issues(E, a, &iss, rc) == 0) {
      bool ok = true;
      for (size_t i = 0; ok && i < n; i++) {
        loaderv *lv = s[0]->u.seq.items[i]->u.obj.data;
        lv->st.wrapped = 1;
        lv->dev = fv->dev; /* Fabric's move_to_device */
        /* DistributedSampler(shuffle=the loader's, seed=the global seed), as Fabric injects it */
        int d = fv->env.world_size > 1 && fsV_truthy(s[1])
                    ? fsE_loader_distribute(E, lv, fv->env.rank, fv->env.world_size, E->seed) : 0;
        if (d == -2) { /* the rebuild of the script's batch sampler clashed: Fabric's R77 text */
          fsV_clearerr();
          lv->st.foreign_batch_sampler = 1;
          fsF_issues_init(&iss);
          fsE_fabric_issues(E, a, &iss, fsF_check_distributed_sampler(&fv->f, &lv->st, &iss));
          fsF_issues_init(&iss);
        }
        ok = d == 0;
      }
      if (ok) r = n ? one_or_tuple(NULL, s[0]) : fsV_none();
    }
  }
  fsF_issues_free(&iss);
  free(sts);
  free(p);
  return r;
}

/* slots: tensor, *args, model */
NATIVE(fabric_backward) {
  if (E->opt->plan) return fsE_plan_done(E, NULL); /* the model is used before an optimizer was set up */
  fabv *fv = FABV(self);
  fs_tensor *t = fsE_need_tensor(s[0], "backward", "tensor");
  modv *mv = s[2]->type == FSV_NONE ? NULL : need_module(s[2], "backward");
  double loss;
  if (t && t->numel == 1 && t->data && fsG_item(t, &loss) == 0) E->last_loss = loss;
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  if (t && (mv || s[2]->type == FSV_NONE) &&
      fsE_fabric_issues(E, a, &iss, fsF_check_backward(&fv->f, mv ? &mv->st : NULL, &iss)) == 0) {
    /* 16-mixed: the plugin's backward runs on scaler.scale(tensor) */
    fs_tensor *scaled = fv->scaling ? fsG_binary_scalar(FSB_MUL, t, fv->scaler.scale, false, false) : fsT_retain(t);
    r = !scaled || fsdp_backward_done(fv, fsG_backward(scaled) == 0) < 0 ? fsE_rt_fail()
        : ddp_sync_grads(fv) < 0                                         ? NULL
                                                                         : fsV_none();
    fsT_release(scaled);
  }
  fsF_issues_free(&iss);
  return r;
}

/* slots: module, optimizer, clip_val, max_norm, norm_type, error_if_nonfinite */
NATIVE(fabric_clip_gradients) {
  fabv *fv = FABV(self);
  modv *mv = need_module(s[0], "clip_gradients");
  optv *ov = mv ? fsV_objdata(s[1], &fsE_optim_class) : NULL;
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  if (mv && !ov) fsV_seterr("clip_gradients(): expected an optimizer, got %s", fsV_type_name(s[1]));
  else if (ov && fsE_fabric_issues(E, a, &iss, fsF_check_clip_gradients(&fv->f, &mv->st, s[2]->type != FSV_NONE,
                                                                      s[3]->type != FSV_NONE, &iss)) == 0) {
    if (fv->scaling && fsO_scaler_unscale(&fv->scaler, ov->o) < 0) /* the plugin's unscale_gradients */
      r = fsE_rt_fail();
    else if (s[2]->type != FSV_NONE) {
      r = fsO_clip_grad_value(ov->o->params, ov->o->nparams, fsV_to_double(s[2])) < 0 ? fsE_rt_fail() : fsV_none();
    } else {
      double total; /* FSDP: the norm over every rank's shards */
      bool global = fv->comm && fsE_sharded_of(fv, ov->o);
      if (fsO_clip_grad_norm_with(ov->o->params, ov->o->nparams, fsV_to_double(s[3]), fsV_to_double(s[4]),
                                  global ? shard_norm : NULL, fv->comm, &total) < 0)
        fsE_rt_fail();
      else
        r = fsE_tensor_value(fsT_scalar((float)total));
    }
  }
  fsF_issues_free(&iss);
  return r;
}

NATIVE(fabric_print) { /* local rank 0 of each node */
  return FABV(self)->env.local_rank == 0 ? fsE_print(E, s, a) : fsV_none();
}

NATIVE(fabric_no_backward_sync) {
  fabv *fv = FABV(self);
  modv *mv = need_module(s[0], "no_backward_sync");
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  if (mv && fsE_fabric_issues(E, a, &iss, fsF_check_no_backward_sync(&fv->f, &mv->st, &iss)) == 0 &&
      (r = fsE_make_ctx(3, FS_DEV_CPU))) {
    ctxv *c = r->u.obj.data;
    c->flag = &fv->no_sync;
    c->owner = fsV_retain(self);
  }
  fsF_issues_free(&iss);
  return r;
}

NATIVE(fabric_to_device) { return fsE_to_device(s[0], FABV(self)->dev); }

/* loggers run on global rank 0, as Lightning's */
NATIVE(fabric_log) {
  return FABV(self)->env.rank != 0 ? fsV_none() : log_metrics(E, FABV(self), &s[0], &s[1], 1, s[2]);
}

NATIVE(fabric_log_dict) {
  if (FABV(self)->env.rank != 0) return fsV_none();
  return log_metrics(E, FABV(self), s[0]->u.dict.keys, s[0]->u.dict.vals, s[0]->u.dict.n, s[1]);
}

static fs_value *collective_call(fsE_ctx *E, fs_value *self, const char *name, fs_value **s, const fsV_args *a) {
  fsF_issues iss;
  fsF_issues_init(&iss);
  fs_value *r = NULL;
  if (fsE_fabric_issues(E, a, &iss, fsF_check_collective(&FABV(self)->f, &iss)) == 0)
    r = collective(FABV(self), name, s);
  fsF_issues_free(&iss);
  return r;
}

NATIVE(fabric_barrier) { return collective_call(E, self, "barrier", s, a); }
NATIVE(fabric_all_reduce) { return collective_call(E, self, "all_reduce", s, a); }
NATIVE(fabric_all_gather) { return collective_call(E, self, "all_gather", s, a); }
NATIVE(fabric_broadcast) { return collective_call(E, self, "broadcast", s, a); }

NATIVE(fabric_global_rank) { return fsV_int(FABV(self)->env.rank); }
NATIVE(fabric_local_rank) { return fsV_int(FABV(self)->env.local_rank); }
NATIVE(fabric_node_rank) { return fsV_int(FABV(self)->env.node_rank); }
NATIVE(fabric_world_size) { return fsV_int(FABV(self)->env.world_size); }
NATIVE(fabric_is_global_zero) { return fsV_bool(FABV(self)->env.rank == 0); }

NATIVE(fabric_device) { /* torch.device("cuda", local_rank), as Fabric's */
  fabv *fv = FABV(self);
  fs_value *d = fsE_make_ctx(0, fv->dev);
  if (d && fv->dev == FS_DEV_CUDA) ((ctxv *)d->u.obj.data)->index = fv->env.local_rank;
  return d;
}

/* ---- the loop API: loggers, strategy, rank_zero_first, init_tensor, autocast, call (issue 15.6) ---- */

NATIVE(fabric_loggers) { /* the list Fabric keeps (None: []) */
  fabv *fv = FABV(self);
  return fv->loggers ? fsV_retain(fv->loggers) : fsV_list(0);
}

NATIVE(fabric_logger) { /* loggers[0], as Lightning's property (an IndexError without loggers) */
  fabv *fv = FABV(self);
  if (!fv->loggers || fv->loggers->u.seq.n == 0) {
    E->raise_type = "IndexError";
    fsV_seterr("list index out of range");
    return NULL;
  }
  return fsV_retain(fv->loggers->u.seq.items[0]);
}

NATIVE(fabric_strategy) { return fsE_strategy_value(FABV(self)->cfg.cls); }

/* rank_zero_first(local): rank 0 (global, or local with local=True) runs
 * the block first; the others wait at a barrier on entry that rank 0 joins
 * when it leaves the block, as Lightning's _InfiniteBarrier (no barrier
 * before launch or on one process). */
typedef struct first_ctx { fs_value *fabric; bool local; } first_ctx;

static int first_rank(const first_ctx *c) {
  const fabv *fv = c->fabric->u.obj.data;
  return c->local ? fv->env.local_rank : fv->env.rank;
}

static int first_barrier(const first_ctx *c) {
  fabv *fv = c->fabric->u.obj.data;
  return !fv->comm || fsCC_barrier(fv->comm) == 0 ? 0 : (fsE_comm_fail(), -1);
}

static fs_value *first_enter(fsE_ctx *E, fs_value *v) {
  (void)E;
  first_ctx *c = v->u.obj.data;
  return first_rank(c) > 0 && first_barrier(c) < 0 ? NULL : fsV_retain(v);
}

static int first_exit(fsE_ctx *E, fs_value *v) {
  (void)E;
  first_ctx *c = v->u.obj.data;
  return first_rank(c) == 0 ? first_barrier(c) : 0;
}

static void first_free(void *p) {
  fsV_release(((first_ctx *)p)->fabric);
  free(p);
}

static const fsV_class first_class = {.name = "context", .enter = first_enter, .exit = first_exit,
                                      .free = first_free};

NATIVE(fabric_rank_zero_first) {
  (void)E, (void)a;
  first_ctx *c = malloc(sizeof *c);
  if (!c) {
    fsV_seterr("out of memory");
    return NULL;
  }
  *c = (first_ctx){fsV_retain(self), fsV_truthy(s[0])};
  return fsV_obj(&first_class, c);
}

/* The keyword arguments a callback's method takes (Fabric's
 * _filter_kwargs_for_callback): all when its parameters are not known or
 * it takes **kwargs, else those it names. */
static fs_value *callback_kwargs(const fs_value *method, fs_value *kwargs) {
  const fsSig *sig = fsE_callable_sig(method);
  bool all = !sig;
  for (size_t i = 0; sig && i < sig->nparams; i++) all |= (sig->params[i].flags & FSSIG_VARKW) != 0;
  if (all) return fsV_retain(kwargs);
  fs_value *d = fsV_dict();
  for (size_t i = 0; d && i < kwargs->u.dict.n; i++)
    if (fsSig_param_index(sig, kwargs->u.dict.keys[i]->u.str.s) >= 0 &&
        fsV_dict_set(d, kwargs->u.dict.keys[i], fsV_retain(kwargs->u.dict.vals[i])) < 0) {
      fsV_release(d);
      d = NULL;
    }
  return d;
}

/* call(hook_name, *args, **kwargs): the method of that name of every
 * callback that has one, in order. slots: hook_name, args, kwargs */
NATIVE(fabric_call) {
  fabv *fv = FABV(self);
  const char *hook = s[0]->u.str.s;
  for (size_t i = 0; i < fv->callbacks->u.seq.n; i++) {
    fs_value *cb = fv->callbacks->u.seq.items[i], *method = NULL;
    int has = fsE_instance_getattr(E, cb, hook, &method);
    if (has < 0 && !strstr(fsV_error(), "has no attribute")) return NULL;
    if (has <= 0) continue; /* getattr(callback, hook_name, None): an AttributeError is "none" */
    if (method->type != FSV_OBJ || !method->u.obj.cls->call) {
      if (fv->env.rank == 0)
        fsD_add(E->diags, FS_SEV_WARNING, "callback", E->src, a->loc,
                "Skipping the callback `%s.%s` because it is not callable.", fsV_type_name(cb), hook);
      fsV_release(method);
      continue;
    }
    fs_value *kw = callback_kwargs(method, s[2]);
    const char **names = kw ? calloc(kw->u.dict.n + 1, sizeof *names) : NULL;
    fs_value *r = NULL;
    if (names) {
      for (size_t k = 0; k < kw->u.dict.n; k++) names[k] = kw->u.dict.keys[k]->u.str.s;
      fsV_args args = {s[1]->u.seq.items, s[1]->u.seq.n, names, kw->u.dict.vals, kw->u.dict.n, a->loc};
      r = fsE_call(E, method, &args);
    } else {
      fsV_seterr("out of memory");
    }
    free(names);
    fsV_release(kw);
    fsV_release(method);
    if (!r) return NULL;
    fsV_release(r);
  }
  return fsV_none();
}

static char *fabric_repr(fs_value *v) {
  fabv *fv = v->u.obj.data;
  fsV_buf b = {0};
  fsV_buf_printf(&b, "<Fabric %s on %s, precision %s>", fsF_cls_name(fv->cfg.cls),
                 fsF_accel_name(fv->cfg.accel), fsF_prec_name(fv->cfg.precision));
  return fsV_buf_take(&b);
}

const fsV_class fsE_fabric_class = {
  .name = "Fabric", .repr = fabric_repr, .free = fabv_free,
};

/* raisesA: model.mark_forward_method(method) (wrappers.py, R51-R53).  A
 * method given as a bound method: under a strategy that wraps the module
 * (DDP, FSDP, DeepSpeed, DP, XLA-FSDP) Fabric hands out a plain function
 * for it, which it then refuses (R51); elsewhere it takes it.  A method of
 * the script's class or one of Module's counts as a method.  Marking changes
 * nothing this runtime does: a set-up model's every method already runs
 * under the strategy. */
NATIVE(module_mark_forward_method) {
  modv *mv = fsV_objdata(self, &fsE_module_class);
  fs_value *x = s[0];
  fsF_vkind kind = x->type == FSV_STR ? FSF_STR : FSF_OTHER;
  const char *tname = fsV_type_name(x), *name = x->type == FSV_STR ? x->u.str.s : "";
  fabv *fv = E->fabric ? fsV_objdata(E->fabric, &fsE_fabric_class) : NULL;
  fsF_cls c = fv ? fv->cfg.cls : FSF_SINGLE;
  int wraps = c == FSF_DDP || c == FSF_FSDP || c == FSF_DEEPSPEED || c == FSF_DP || c == FSF_XLA_FSDP;
  if (!strcmp(tname, "method") && mv->st.wrapped) {
    if (!wraps) return fsV_none();
    tname = "function";
  }
  int has_method = 0;
  if (kind == FSF_STR) {
    fs_value *v = NULL;
    int r = fsE_instance_getattr(E, self, name, &v);
    has_method = r == 1 && !strcmp(fsV_type_name(v), "method");
    if (r == 1) fsV_release(v);
    const fsSig *sig = r != 1 ? fsSig_member("Module", name) : NULL;
    has_method |= sig && sig->kind == FSSIG_METHOD;
  }
  fsF_issues iss;
  fsF_issues_init(&iss);
  if (fsE_fabric_issues(E, a, &iss, fsF_check_mark_forward_method(&mv->st, kind, name, tname, has_method, &iss)) < 0)
    return NULL;
  return fsV_none();
}

static const fsE_reg fabric_funcs[] = {
  {"Module.mark_forward_method", module_mark_forward_method},
  {"Fabric", f_fabric},
  {"Fabric.launch", fabric_launch}, {"Fabric.seed_everything", fabric_seed_everything},
  {"seed_everything", fabric_seed_everything}, /* lightning.seed_everything and lightning.fabric.seed_everything: the same body (self unused) */
  {"Fabric.init_module", fabric_init_module}, {"Fabric.setup", fabric_setup},
  {"Fabric.setup_module", fabric_setup_module}, {"Fabric.setup_optimizers", fabric_setup_optimizers},
  {"Fabric.setup_dataloaders", fabric_setup_dataloaders}, {"Fabric.backward", fabric_backward},
  {"Fabric.clip_gradients", fabric_clip_gradients}, {"Fabric.print", fabric_print},
  {"Fabric.no_backward_sync", fabric_no_backward_sync}, {"Fabric.to_device", fabric_to_device},
  {"Fabric.sharded_model", fabric_sharded_model},
  {"Fabric.log", fabric_log}, {"Fabric.log_dict", fabric_log_dict},
  {"Fabric.barrier", fabric_barrier}, {"Fabric.all_reduce", fabric_all_reduce},
  {"Fabric.all_gather", fabric_all_gather}, {"Fabric.broadcast", fabric_broadcast},
  {"Fabric.global_rank", fabric_global_rank}, {"Fabric.local_rank", fabric_local_rank},
  {"Fabric.node_rank", fabric_node_rank}, {"Fabric.world_size", fabric_world_size},
  {"Fabric.is_global_zero", fabric_is_global_zero}, {"Fabric.device", fabric_device},
  {"Fabric.logger", fabric_logger}, {"Fabric.loggers", fabric_loggers}, {"Fabric.strategy", fabric_strategy},
  {"Fabric.rank_zero_first", fabric_rank_zero_first}, {"Fabric.call", fabric_call},
  {NULL, NULL},
};
const fsE_lib fsE_lib_fabric = {"fabric", fabric_funcs};
