/* torchckpt_driver.c -- the C side of the torch checkpoint parity test.
 *   torchckpt_driver read FILE        prints FILE's value as canonical JSON
 *   torchckpt_driver write FILE KIND  saves value KIND and prints its JSON
 * KIND: "weights" (only what torch 1.13's weights_only loader reads: no
 * floats) or "full" (floats too). torchckpt.py builds the same JSON from
 * torch's objects and compares: floats and tensor elements as bit patterns,
 * so equal means identical. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "torchckpt.h"

static void put_json_str(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

static int put_value(const fsH_file *f, const fsQ_value *v) {
  switch (v->kind) {
  case FSQ_NONE: printf("null"); return 0;
  case FSQ_BOOL: printf(v->u.b ? "true" : "false"); return 0;
  case FSQ_INT: printf("%" PRId64, v->u.i); return 0;
  case FSQ_FLOAT: {
    uint64_t bits;
    memcpy(&bits, &v->u.f, sizeof bits);
    printf("{\"float\": \"%016" PRIx64 "\"}", bits);
    return 0;
  }
  case FSQ_STR: put_json_str(v->u.str.s, v->u.str.len); return 0;
  case FSQ_TUPLE:
  case FSQ_LIST:
  case FSQ_SET:
    printf(v->kind == FSQ_TUPLE ? "{\"tuple\": [" : v->kind == FSQ_SET ? "{\"set\": [" : "[");
    for (size_t i = 0; i < v->u.seq.n; i++) {
      if (i) printf(", ");
      if (put_value(f, v->u.seq.v[i]) < 0) return -1;
    }
    printf(v->kind == FSQ_LIST ? "]" : "]}");
    return 0;
  case FSQ_DICT:
    printf("{\"dict\": [");
    for (size_t i = 0; i < v->u.dict.n; i++) {
      printf(i ? ", [" : "[");
      if (put_value(f, v->u.dict.k[i]) < 0) return -1;
      printf(", ");
      if (put_value(f, v->u.dict.v[i]) < 0) return -1;
      printf("]");
    }
    printf("], \"ordered\": %s}", v->ordered ? "true" : "false");
    return 0;
  case FSQ_TENSOR: {
    const fsQ_tensor *t = &v->u.t;
    printf("{\"tensor\": \"%s\", \"shape\": [", fsT_dtype_name(t->dtype));
    for (int k = 0; k < t->ndim; k++) printf(k ? ", %" PRId64 : "%" PRId64, t->shape[k]);
    printf("], \"values\": [");
    size_t es = fsT_dtype_size(t->dtype);
    uint8_t *buf = malloc(t->numel * es + 1);
    char *err = NULL;
    if (!buf) return -1;
    if (f ? fsH_read(f, v, 0, t->numel, t->dtype, buf, &err) < 0 : (memcpy(buf, t->data, t->numel * es), 0)) {
      fprintf(stderr, "torchckpt_driver: %s\n", err);
      free(err);
      free(buf);
      return -1;
    }
    for (uint64_t i = 0; i < t->numel; i++) {
      if (i) printf(", ");
      if (t->dtype == FS_F32) printf("\"%08" PRIx32 "\"", ((uint32_t *)buf)[i]);
      else if (t->dtype == FS_BF16) printf("\"%04" PRIx16 "\"", ((uint16_t *)buf)[i]);
      else printf("%" PRId64, ((int64_t *)buf)[i]);
    }
    free(buf);
    printf("]}");
    return 0;
  }
  default: return -1;
  }
}

/* The values saved: a state dict, an optimizer-like dict, nested containers. */
static const float weight[6] = {0.5f, -1.25f, 3.0e-8f, 1e30f, -0.0f, 7.0f};
static const float bias[2] = {0.1f, -0.2f};
static const uint16_t half[3] = {0x3f80, 0xc040, 0x7f80}; /* bf16 1, -3, inf */
static const int64_t steps[4] = {0, -1, INT64_MAX, INT64_MIN};

static fsQ_value *build(fsQ_doc *d, bool floats) {
  int64_t s23[2] = {2, 3}, s2[1] = {2}, s3[1] = {3}, s22[2] = {2, 2};
  fsQ_value *root = fsQ_container(d, FSQ_DICT), *model = fsQ_ordered_dict(d);
  fsQ_set(root, fsQ_str(d, "model"), model);
  fsQ_set(model, fsQ_str(d, "fc.weight"), fsQ_tensor_new(d, FS_F32, 2, s23, weight));
  fsQ_set(model, fsQ_str(d, "fc.bias"), fsQ_tensor_new(d, FS_F32, 1, s2, bias));
  fsQ_set(model, fsQ_str(d, "emb"), fsQ_tensor_new(d, FS_BF16, 1, s3, half));
  fsQ_set(model, fsQ_str(d, "ids"), fsQ_tensor_new(d, FS_I64, 2, s22, steps));
  fsQ_set(model, fsQ_str(d, "scalar"), fsQ_tensor_new(d, FS_F32, 0, NULL, weight + 5));
  fsQ_value *opt = fsQ_container(d, FSQ_DICT), *state = fsQ_container(d, FSQ_DICT), *s0 = fsQ_container(d, FSQ_DICT);
  fsQ_set(root, fsQ_str(d, "optimizer"), opt);
  fsQ_set(opt, fsQ_str(d, "state"), state);
  fsQ_set(state, fsQ_int(d, 0), s0);
  fsQ_set(s0, fsQ_str(d, "step"), fsQ_int(d, 12));
  fsQ_set(s0, fsQ_str(d, "exp_avg"), fsQ_tensor_new(d, FS_F32, 2, s23, weight));
  fsQ_value *groups = fsQ_container(d, FSQ_LIST), *g = fsQ_container(d, FSQ_DICT), *params = fsQ_container(d, FSQ_LIST);
  fsQ_set(opt, fsQ_str(d, "param_groups"), groups);
  fsQ_push(groups, g);
  fsQ_set(g, fsQ_str(d, "params"), params);
  for (int i = 0; i < 1100; i++) fsQ_push(params, fsQ_int(d, i)); /* past one APPENDS batch */
  if (floats) {
    fsQ_set(g, fsQ_str(d, "lr"), fsQ_float(d, 1e-3));
    fsQ_value *betas = fsQ_container(d, FSQ_TUPLE);
    fsQ_push(betas, fsQ_float(d, 0.9));
    fsQ_push(betas, fsQ_float(d, 0.999));
    fsQ_set(g, fsQ_str(d, "betas"), betas);
    fsQ_set(g, fsQ_str(d, "eps"), fsQ_float(d, -0.0));
  }
  fsQ_value *misc = fsQ_container(d, FSQ_LIST), *tuple = fsQ_container(d, FSQ_TUPLE);
  fsQ_set(root, fsQ_str(d, "misc"), misc);
  fsQ_push(misc, fsQ_none(d));
  fsQ_push(misc, fsQ_bool(d, true));
  fsQ_push(misc, fsQ_bool(d, false));
  int64_t ints[] = {0, 255, 256, 65535, 65536, -1, INT32_MIN, INT32_MAX, (int64_t)INT32_MAX + 1, INT64_MIN, INT64_MAX, -(INT64_C(1) << 40)};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) fsQ_push(misc, fsQ_int(d, ints[i]));
  fsQ_push(misc, fsQ_str(d, "caf\xc3\xa9 \"quoted\" \\ \n"));
  fsQ_push(misc, fsQ_str(d, ""));
  fsQ_push(misc, tuple);
  for (int i = 0; i < 5; i++) fsQ_push(tuple, fsQ_str(d, "t"));
  fsQ_push(misc, fsQ_container(d, FSQ_TUPLE));
  fsQ_push(misc, fsQ_container(d, FSQ_DICT));
  fsQ_push(misc, model); /* the same tensors again: torch shares their storages */
  fsQ_set(root, fsQ_str(d, "step"), fsQ_int(d, 100));
  return root;
}

int main(int argc, char **argv) {
  char *err = NULL;
  if (argc == 3 && strcmp(argv[1], "read") == 0) {
    fsH_file f;
    if (fsH_open(&f, argv[2], &err) < 0) {
      fprintf(stderr, "torchckpt_driver: %s\n", err);
      free(err);
      return 1;
    }
    int rc = put_value(&f, f.doc->root);
    putchar('\n');
    fsH_close(&f);
    return rc < 0;
  }
  if (argc == 4 && strcmp(argv[1], "write") == 0) {
    fsQ_doc *d = fsQ_new();
    fsQ_value *root = d ? build(d, strcmp(argv[3], "full") == 0) : NULL;
    int rc = root && fsH_save(argv[2], root, &err) == 0 ? put_value(NULL, root) : -1;
    putchar('\n');
    if (err) fprintf(stderr, "torchckpt_driver: %s\n", err);
    free(err);
    fsQ_free(d);
    return rc < 0;
  }
  fprintf(stderr, "usage: torchckpt_driver read FILE | write FILE weights|full\n");
  return 2;
}
