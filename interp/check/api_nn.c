/* api_nn.c -- the checker's models of modules and optimizers: a model object
 * per construction (on the meta device when built under init_module(
 * empty_init=True) with a strategy that defers, or inside device("meta")),
 * forward, parameters(), to_empty, and the optimizers made over them. */
#include "check_int.h"
#include "sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- objects ------------------------------------------------------------ */

cv fsC_new_model(C *c, const char *cls, fs_loc loc) {
  uint32_t id = fsC_new_obj(c, OB_MODEL, loc);
  cobj *m = fsC_o(c, id);
  m->cls = cls;
  for (int i = c->nctx; i-- > 0;) {
    const cobj *x = fsC_o(c, c->ctxs[i]);
    if (x->ctx == CTX_OTHER) continue;
    if (x->ctx == CTX_META || (x->ctx == CTX_INIT && x->effect == FSF_INIT_META)) {
      m->meta = (mbit){MB_T, 0};
      m->why_kind = x->ctx == CTX_META ? WHY_DEVICE : WHY_INIT;
      m->why_loc = x->loc;
      m->fabric = x->fabric;
    } else if (x->ctx == CTX_DEVICE) {
      m->placed = x->effect; /* its fsF_pdev */
    } else if (x->ctx == CTX_INIT) { /* on the fabric's device */
      const fsF_config *cfg = fsC_cfg(c, x->fabric);
      m->placed = !cfg ? FSF_PD_OTHER : cfg->accel == FSF_CUDA ? FSF_PD_CUDA : cfg->accel == FSF_CPU ? FSF_PD_CPU : FSF_PD_OTHER;
    }
    if (x->ctx == CTX_INIT && x->effect == FSF_INIT_EMPTY) {
      m->empty = (mbit){MB_T, 0};
      m->why_kind = WHY_INIT;
      m->why_loc = x->loc;
      m->fabric = x->fabric;
    }
    break;
  }
  return fsC_obj(id);
}

/* Each model a value may be on some path (raw objects). */
size_t fsC_raw_models(C *c, const cv *v, uint32_t *out, size_t max) {
  size_t n = 0;
  size_t k = v->k == CV_PHI ? v->n : 1;
  const cv *items = v->k == CV_PHI ? v->p : v;
  for (size_t i = 0; i < k && n < max; i++) {
    uint32_t raw;
    if (fsC_model_obj(c, &items[i], &raw)) out[n++] = raw;
  }
  return n;
}

cv fsC_forward(C *c, const cv *model, fs_loc loc) {
  uint32_t raws[MAXALT];
  size_t n = fsC_raw_models(c, model, raws, MAXALT);
  const cv *x = model->k == CV_PHI ? &((const cv *)model->p)[0] : model;
  int wrapped = x->k == CV_OBJ && fsC_o(c, x->id)->wrapped;
  for (size_t i = 0; i < n; i++) {
    const cobj *r = fsC_o(c, raws[i]);
    if (r->meta.m == MB_T && !wrapped) { /* a set-up one already had its setup error */
      fs_diag *g = fsC_report(c, FS_SEV_ERROR, "meta-forward", loc,
                              "the model's parameters are on the meta device: they hold no data to compute with");
      if (g) {
        fsD_note(g, c->src, r->why_loc, "they were put on the meta device here");
        fsD_help(g, "set the model up first (`model = fabric.setup_module(model)`), which materializes them");
      }
    } else if (r->empty.m & MB_T) {
      fs_diag *g = fsC_report(c, FS_SEV_WARNING, "uninit", loc,
                              "the model runs on uninitialized parameters: nothing initialized them after `%s`",
                              fsC_text(c, r->why_loc));
      if (g) {
        fsD_note(g, c->src, r->why_loc, "from here on its parameters hold uninitialized memory");
        fsC_note_why(c, g, r->empty.why);
        fsD_help(g, "call `model.reset_parameters()` or load a checkpoint (`fabric.load(path, {\"model\": model})`) before training");
      }
    }
  }
  cv t = {.k = CV_TENSOR};
  if (wrapped) t.id = fsC_o(c, x->id)->fabric + 1;
  return t;
}

/* Collects the parameter references in an optimizer's `params` argument. */
static void collect_params(C *c, const cv *v, cobj *opt, int *found, int depth) {
  if (depth > 8) return;
  if (v->k == CV_SEQ || v->k == CV_PHI || v->k == CV_DICT) {
    size_t n = v->k == CV_DICT ? 2 * v->n : v->n;
    for (size_t i = 0; i < n; i++) collect_params(c, &((const cv *)v->p)[i], opt, found, depth + 1);
    return;
  }
  if (!fsC_is(v, OB_PARAMS, c) && !fsC_is(v, OB_PARAM, c)) return;
  const cobj *p = fsC_o(c, v->id);
  if (!*found) {
    opt->model = p->model;
    opt->fsdp_flat = p->fsdp_flat;
    opt->xla_sharded = p->xla_sharded;
    opt->pmeta = p->pmeta;
  } else {
    opt->fsdp_flat &= p->fsdp_flat;
    opt->xla_sharded &= p->xla_sharded;
    opt->pmeta.m |= p->pmeta.m;
    if (!opt->pmeta.why) opt->pmeta.why = p->pmeta.why;
  }
  *found = 1;
}


/* SGD/Adam/AdamW(params, ...): the optimizer remembers whose parameters it
 * holds and whether they were on the meta device (the seed's rule). */
int fsC_api_optimizer(C *c, const cargs *a, cv *out) {
  const fs_node *node = NULL;
  uint32_t id = fsC_new_obj(c, OB_OPTIM, a->call->loc);
  const cv *p = fsC_arg(a, "params", &node);
  int found = 0;
  cobj tmp = *fsC_o(c, id);
  if (p) collect_params(c, p, &tmp, &found, 0);
  if (node) tmp.why_loc = node->loc;
  const fs_value *fused = fsC_cval(fsC_arg(a, "fused", NULL)); /* torch's fused kernels unscale themselves (R126) */
  tmp.fused = fused && fsV_truthy(fused);
  *fsC_o(c, id) = tmp;
  *out = fsC_obj(id);
  return 1;
}

/* ---- module methods ------------------------------------------------------ */

/* model.generate's literal arguments against the rule the run applies
 * (sample.h), each reported at its argument. */
static void generate_literals(C *c, const cargs *a) {
  static const char *const names[] = {"prompt", "max_new_tokens", "temperature", "top_k"};
  for (int i = 0; i < 4; i++) {
    const fs_node *node = NULL;
    const fs_value *x = fsC_cval(fsC_arg(a, names[i], &node));
    fsSM_opts o = {(const unsigned char *)"x", 1, 0, 1.0, FSSM_ALL};
    if (!x) continue;
    if (i == 0 && x->type == FSV_STR) o.n = x->u.str.len;
    else if (i == 1 && x->type == FSV_INT) o.max_new = x->u.i;
    else if (i == 2 && (x->type == FSV_INT || x->type == FSV_FLOAT)) o.temperature = fsV_to_double(x);
    else if (i == 3 && x->type == FSV_INT) o.top_k = x->u.i;
    char err[160];
    if (fsSM_check_opts(&o, err, sizeof err) < 0)
      fsC_report(c, FS_SEV_ERROR, "value", node ? node->loc : a->call->loc, "%s", err);
  }
}

/* A module's `.to(device)` / `to_empty(device=...)`: "cpu", "cuda", "cuda:0",
 * torch.device("cpu") or a fabric's `device` (W4); anything else, another
 * index included, is FSF_PD_OTHER. */
static fsF_pdev placement_arg(C *c, const cargs *a) {
  const fs_node *node = NULL;
  const cv *d = fsC_arg(a, "device", &node);
  if (node && node->kind == FS_N_ATTR && !strcmp(node->str, "device") && node->kids[0]->kind == FS_N_NAME) {
    cv f = fsC_eval(c, node->kids[0]); /* `fabric.device`: the accelerator's (rank 0's cuda:0) */
    const fsF_config *cfg = fsC_is(&f, OB_FABRIC, c) ? fsC_cfg(c, f.id) : NULL;
    if (cfg) return cfg->accel == FSF_CUDA ? FSF_PD_CUDA : cfg->accel == FSF_CPU ? FSF_PD_CPU : FSF_PD_OTHER;
  }
  if (d && fsC_is(d, OB_CTX, c) && fsC_o(c, d->id)->ctx == CTX_DEVICE) {
    fsF_pdev p = (fsF_pdev)fsC_o(c, d->id)->effect;
    return p == FSF_PD_CPU ? p : FSF_PD_OTHER; /* torch.device("cuda") keeps no index here */
  }
  const fs_value *t = d ? fsC_cval(d) : NULL;
  if (t && t->type == FSV_STR && (!strcmp(t->u.str.s, "cpu") || !strcmp(t->u.str.s, "cuda") || !strcmp(t->u.str.s, "cuda:0")))
    return fsC_device_type(t);
  return FSF_PD_OTHER;
}

int fsC_module_method(C *c, const cargs *a, const cv *recv, const char *m, cv *out) {
  if (!strcmp(m, "mark_forward_method")) return fsC_mark_forward_method(c, a, recv, out);
  uint32_t raws[MAXALT];
  size_t nr = fsC_raw_models(c, recv, raws, MAXALT);
  if (!nr) return 0;
  if (!strcmp(m, "parameters") || !strcmp(m, "named_parameters")) {
    uint32_t id = fsC_new_obj(c, OB_PARAMS, a->call->loc);
    cobj p = *fsC_o(c, id);
    p.model = raws[0];
    p.effect = !strcmp(m, "named_parameters"); /* its elements are (name, parameter) */
    p.pmeta = fsC_o(c, raws[0])->meta;
    for (size_t i = 1; i < nr; i++) {
      p.pmeta.m |= fsC_o(c, raws[i])->meta.m;
      if (!p.pmeta.why) p.pmeta.why = recv->id;
    }
    if (recv->k == CV_PHI && p.pmeta.m == (MB_F | MB_T) && !p.pmeta.why) p.pmeta.why = recv->id;
    /* the first path's model decides how the parameters are sharded */
    const cv *x = recv;
    uint32_t raw;
    for (uint32_t i = 0; recv->k == CV_PHI && i < recv->n; i++)
      if (fsC_model_obj(c, &((const cv *)recv->p)[i], &raw)) { x = &((const cv *)recv->p)[i]; break; }
    const cobj *w = fsC_o(c, x->id);
    const fsF_config *cfg = w->wrapped ? fsC_cfg(c, w->fabric) : NULL;
    p.fsdp_flat = w->wrapped && w->fsdp_root;
    p.xla_sharded = cfg && cfg->cls == FSF_XLA_FSDP;
    *fsC_o(c, id) = p;
    *out = fsC_obj(id);
    return 1;
  }
  /* to(dtype=...), to(torch.bfloat16), to(memory_format=...) leave the module where it is */
  const cv *dev = !strcmp(m, "to") ? fsC_arg(a, "device", NULL) : NULL;
  if (!strcmp(m, "to") && (!dev || fsC_is_none(dev) || dev->k == CV_CLASS)) return 0;
  if (!strcmp(m, "to") || !strcmp(m, "cuda") || !strcmp(m, "cpu") || !strcmp(m, "to_empty")) {
    fsF_pdev where = !strcmp(m, "cuda") ? FSF_PD_CUDA : !strcmp(m, "cpu") ? FSF_PD_CPU : placement_arg(c, a);
    for (size_t i = 0; i < nr; i++) fsC_place(c, raws[i], where, !strcmp(m, "to_empty"));
    if (strcmp(m, "to_empty")) return 0; /* the row's result */
  }
  if (!strcmp(m, "to_empty")) {
    for (size_t i = 0; i < nr; i++) {
      cobj *r = fsC_ow(c, raws[i]);
      r->meta = (mbit){MB_F, 0};
      r->empty = (mbit){MB_T, 0};
      r->why_kind = WHY_TO_EMPTY;
      r->why_loc = a->call->loc;
    }
    *out = *recv;
    return 1;
  }
  if ((!strcmp(m, "state_dict") || !strcmp(m, "load_state_dict")) && !c->python && c->o->will_run && recv->k == CV_OBJ) {
    const cobj *w = fsC_o(c, recv->id); /* a .fab will run: the run's flat shards have none */
    const fsF_config *cfg = w->wrapped ? fsC_cfg(c, w->fabric) : NULL;
    if (cfg && cfg->cls == FSF_FSDP) fsC_report(c, FS_SEV_ERROR, "unsupported", a->call->loc, FSF_FSDP_STATE_DICT_UNSUPPORTED, m);
  }
  if (!strcmp(m, "reset_parameters") || !strcmp(m, "load_state_dict")) {
    for (size_t i = 0; i < nr; i++) fsC_ow(c, raws[i])->empty = (mbit){MB_F, 0};
    *out = fsC_const(c, fsV_none());
    return 1;
  }
  if (!strcmp(m, "state_dict")) { /* names not known, every value a tensor: no module in it */
    cv *kv = fsC_alloc(c, 2 * sizeof *kv);
    kv[0] = fsC_unknown();
    kv[1] = (cv){.k = CV_TENSOR};
    *out = (cv){.k = CV_DICT, .sub = SEQ_UNSIZED, .n = 1, .p = kv};
    return 1;
  }
  if (!strcmp(m, "forward")) { *out = fsC_forward(c, recv, a->call->loc); return 1; }
  if (!strcmp(m, "generate")) { /* its forwards need data as model(x)'s do */
    fsC_forward(c, recv, a->call->loc);
    generate_literals(c, a);
    *out = fsC_unknown();
    return 1;
  }
  return 0;
}
