/* lib_ctx.c -- device(...) values and the `with` contexts: no_grad(),
 * fabric.init_module() (where new parameters go) and no_backward_sync.
 * A context saves what it changes on enter and restores it on exit. */
#include <string.h>

#include "autograd.h"
#include "eval_int.h"

/* ---- context managers: device(...), no_grad() ----------------------------- */



static fs_value *ctx_enter(fsE_ctx *E, fs_value *v) {
  ctxv *c = v->u.obj.data;
  if (c->precision) {
    c->saved_dtype = E->default_float;
    E->default_float = c->dtype;
    c->saved_autocast = fsG_set_autocast(c->autocast);
  }
  if (c->kind == 1) {
    c->saved_grad = fsG_set_grad_enabled(false);
  } else if (c->kind == 0 || c->kind == 2) {
    c->saved_dev = E->device;
    E->device = c->dev;
  } else if (c->flag) {
    *c->flag = true;
  }
  return fsV_retain(v);
}

static int ctx_exit(fsE_ctx *E, fs_value *v) {
  ctxv *c = v->u.obj.data;
  if (c->precision) {
    E->default_float = c->saved_dtype;
    fsG_set_autocast(c->saved_autocast);
  }
  if (c->kind == 1) fsG_set_grad_enabled(c->saved_grad);
  else if (c->kind == 0 || c->kind == 2) E->device = c->saved_dev;
  else if (c->flag) *c->flag = false;
  return 0;
}

static char *ctx_repr(fs_value *v) {
  ctxv *c = v->u.obj.data;
  fsV_buf b = {0};
  if (c->kind == 0 && c->index >= 0) fsV_buf_printf(&b, "device(type='%s', index=%d)", fsT_device_name(c->dev), c->index);
  else if (c->kind == 0) fsV_buf_printf(&b, "device(type='%s')", fsT_device_name(c->dev));
  else fsV_buf_puts(&b, c->kind == 1 ? "<no_grad>" : c->kind == 2 ? "<init_module>"
                        : c->kind == 4 ? "<precision>" : "<no_backward_sync>");
  return fsV_buf_take(&b);
}

static void ctx_free(void *p) {
  fsV_release(((ctxv *)p)->owner);
  free(p);
}

/* ---- no_grad() as a decorator: `@no_grad() def f` ---- */

typedef struct wrapv { fs_value *ctx, *fn; } wrapv; /* both held */

static void wrap_free(void *p) {
  wrapv *w = p;
  fsV_release(w->ctx);
  fsV_release(w->fn);
  free(w);
}

/* the function called inside the context (entered and exited per call) */
static fs_value *wrap_call(fsE_ctx *E, fs_value *self, const fsV_args *a) {
  wrapv *w = self->u.obj.data;
  fs_value *in = ctx_enter(E, w->ctx);
  fsV_release(in);
  fs_value *r = fsE_call(E, w->fn, a);
  ctx_exit(E, w->ctx);
  return r;
}

static char *wrap_repr(fs_value *v) { return fsV_repr(((wrapv *)v->u.obj.data)->fn); }

static const fsV_class wrap_class = {.name = "function", .call = wrap_call, .repr = wrap_repr, .free = wrap_free};

/* no_grad()(f): torch's _DecoratorContextManager.__call__ */
static fs_value *ctx_call(fsE_ctx *E, fs_value *self, const fsV_args *a) {
  (void)E;
  ctxv *c = self->u.obj.data;
  if (c->kind != 1 || a->npos != 1 || a->nkw) {
    fsV_seterr("'context' object is not callable");
    return NULL;
  }
  wrapv *w = malloc(sizeof *w);
  if (!w) {
    fsV_seterr("out of memory");
    return NULL;
  }
  w->ctx = fsE_make_ctx(1, FS_DEV_CPU); /* its own saved state: calls may nest */
  w->fn = fsV_retain(a->pos[0]);
  if (!w->ctx) {
    wrap_free(w);
    return NULL;
  }
  return fsV_obj(&wrap_class, w);
}

const fsV_class fsE_ctx_class = {
  .name = "context", .enter = ctx_enter, .exit = ctx_exit, .repr = ctx_repr, .free = ctx_free,
  .call = ctx_call,
};

fs_value *fsE_make_ctx(int kind, fs_device dev) {
  ctxv *c = calloc(1, sizeof *c);
  if (!c) {
    fsV_seterr("out of memory");
    return NULL;
  }
  c->kind = kind;
  c->dev = dev;
  c->index = -1;
  return fsV_obj(&fsE_ctx_class, c);
}

NATIVE(b_device) {
  const char *t = s[0]->u.str.s;
  for (int d = 0; d < FS_DEV__COUNT; d++)
    if (strcmp(t, fsT_device_name((fs_device)d)) == 0 ||
        (d == FS_DEV_CUDA && strncmp(t, "cuda:", 5) == 0))
      return fsE_make_ctx(0, (fs_device)d);
  fsV_seterr("Expected one of cpu, cuda, meta device type at start of device string: %s", t);
  return NULL;
}

NATIVE(b_no_grad) { return fsE_make_ctx(1, FS_DEV_CPU); }

static const fsE_reg ctx_funcs[] = {
  {"device", b_device}, {"no_grad", b_no_grad},
  {"inference_mode", b_no_grad}, /* torch's inference tensors are not modelled: no_grad's effect */
  {NULL, NULL},
};
const fsE_lib fsE_lib_ctx = {"ctx", ctx_funcs};
