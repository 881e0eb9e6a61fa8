/* lib_shape.c -- torch's shape ops on Tensor values: view, reshape,
 * permute, transpose, .T/.mT, (un)squeeze, flatten, expand, repeat, split,
 * chunk, contiguous, cat, stack.  Which of them share storage with their
 * input (as torch's views do) is autograd.h's convention; torch's errors. */
#include <string.h>

#include "autograd.h"
#include "eval_int.h"

/* ---- shape ops ---- */

int fsE_dim_arg(const fs_value *v, int *d) {
  if (v->type != FSV_INT && v->type != FSV_BOOL) {
    fsV_seterr("argument 'dim' must be int, not %s", fsV_type_name(v));
    return -1;
  }
  *d = (int)fsE_ival(v);
  return 0;
}

/* view/reshape: one -1 is inferred, as torch */
static fs_value *reshape_to(fs_tensor *x, const fs_value *args, const char *fn) {
  int64_t dims[FS_MAX_RANK], known = 1;
  int rank, infer = -1;
  if (fsE_dims_of(args, dims, &rank, fn) < 0) return NULL;
  for (int i = 0; i < rank; i++) {
    if (dims[i] == -1) {
      if (infer >= 0) {
        fsV_seterr("only one dimension can be inferred");
        return NULL;
      }
      infer = i;
    } else if (dims[i] < 0) {
      fsV_seterr("invalid shape dimension %lld", (long long)dims[i]);
      return NULL;
    } else known *= dims[i];
  }
  if (infer >= 0) {
    if (known == 0 || x->numel % known) {
      char a[96], b[96];
      fsV_seterr("shape '%s' is invalid for input of size %lld", fsT_dims_str(rank, dims, a, sizeof a),
                 (long long)x->numel);
      (void)b;
      return NULL;
    }
    dims[infer] = x->numel / known;
  }
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  if (n != x->numel) {
    char a[96];
    fsV_seterr("shape '%s' is invalid for input of size %lld", fsT_dims_str(rank, dims, a, sizeof a), (long long)x->numel);
    return NULL;
  }
  return fsE_tensor_value(fsG_reshape(x, rank, dims));
}

NATIVE(t_view) { return reshape_to(TENSOR(self), s[0], "view"); }
NATIVE(t_reshape) { return reshape_to(TENSOR(self), s[0], "reshape"); }
NATIVE(t_contiguous) { return fsV_retain(self); } /* every tensor is contiguous */

NATIVE(t_permute) {
  int64_t dims[FS_MAX_RANK];
  int rank, perm[FS_MAX_RANK];
  fs_tensor *x = TENSOR(self);
  if (fsE_dims_of(s[0], dims, &rank, "permute") < 0) return NULL;
  if (rank != x->rank) {
    fsV_seterr("permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = %d is not equal to len(dims) = %d",
               x->rank, rank);
    return NULL;
  }
  for (int i = 0; i < rank; i++) perm[i] = (int)dims[i];
  return fsE_tensor_value(fsG_permute(x, perm));
}

NATIVE(t_transpose) {
  int a_, b;
  if (fsE_dim_arg(s[0], &a_) < 0 || fsE_dim_arg(s[1], &b) < 0) return NULL;
  return fsE_tensor_value(fsG_transpose(TENSOR(self), a_, b));
}

NATIVE(t_T) {
  fs_tensor *x = TENSOR(self);
  int perm[FS_MAX_RANK];
  for (int i = 0; i < x->rank; i++) perm[i] = x->rank - 1 - i;
  return fsE_tensor_value(fsG_permute(x, perm));
}

NATIVE(t_mT) {
  fs_tensor *x = TENSOR(self);
  if (x->rank < 2) {
    fsV_seterr("tensor.mT is only supported on matrices or batches of matrices. Got %d-D tensor.", x->rank);
    return NULL;
  }
  return fsE_tensor_value(fsG_transpose(x, -2, -1));
}

NATIVE(t_unsqueeze) {
  fs_tensor *x = TENSOR(self);
  int d;
  if (fsE_dim_arg(s[0], &d) < 0) return NULL;
  int r = x->rank + 1;
  if (d < -r || d >= r) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, d);
    return NULL;
  }
  if (d < 0) d += r;
  int64_t dims[FS_MAX_RANK + 1];
  for (int i = 0, k = 0; i < r; i++) dims[i] = i == d ? 1 : x->shape[k++];
  return fsE_tensor_value(fsG_reshape(x, r, dims));
}

NATIVE(t_squeeze) {
  fs_tensor *x = TENSOR(self);
  int64_t dims[FS_MAX_RANK];
  int r = 0, d = -1;
  if (s[0]->type != FSV_NONE) {
    if (fsE_dim_arg(s[0], &d) < 0) return NULL;
    int rr = x->rank ? x->rank : 1;
    if (d < -rr || d >= rr) {
      fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -rr, rr - 1, d);
      return NULL;
    }
    if (d < 0) d += rr;
  }
  for (int i = 0; i < x->rank; i++)
    if (!(x->shape[i] == 1 && (d < 0 || d == i))) dims[r++] = x->shape[i];
  return fsE_tensor_value(fsG_reshape(x, r, dims));
}

/* x.flatten(start_dim, end_dim) and torch.flatten(input, start_dim, end_dim) */
NATIVE(t_flatten) {
  fs_tensor *x = fsE_need_tensor(self ? self : s[0], "flatten", "input");
  if (!x) return NULL;
  if (!self) s++;
  int a_ = (int)fsE_ival(s[0]), b = (int)fsE_ival(s[1]), r = x->rank ? x->rank : 1;
  if (a_ < -r || a_ >= r || b < -r || b >= r) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1,
               a_ < -r || a_ >= r ? a_ : b);
    return NULL;
  }
  if (a_ < 0) a_ += r;
  if (b < 0) b += r;
  if (a_ > b) {
    fsV_seterr("flatten() has invalid args: start_dim cannot come after end_dim");
    return NULL;
  }
  if (x->rank == 0) {
    int64_t one = 1;
    return fsE_tensor_value(fsG_reshape(x, 1, &one));
  }
  int64_t dims[FS_MAX_RANK];
  int k = 0;
  for (int i = 0; i < x->rank; i++) {
    if (i <= a_ || i > b) dims[k++] = x->shape[i];
    else dims[k - 1] *= x->shape[i];
  }
  return fsE_tensor_value(fsG_reshape(x, k, dims));
}

NATIVE(t_expand) {
  int64_t dims[FS_MAX_RANK];
  int rank;
  if (fsE_dims_of(s[0], dims, &rank, "expand") < 0) return NULL;
  return fsE_tensor_value(fsG_expand(TENSOR(self), rank, dims));
}

/* repeat(*sizes): x viewed as [1, a, 1, b], expanded to [r0, a, r1, b], folded */
NATIVE(t_repeat) {
  fs_tensor *x = TENSOR(self);
  int64_t reps[FS_MAX_RANK];
  int rank;
  if (fsE_dims_of(s[0], reps, &rank, "repeat") < 0) return NULL;
  if (rank < x->rank) {
    fsV_seterr("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
    return NULL;
  }
  if (2 * rank > FS_MAX_RANK) {
    fsV_seterr("repeat(): at most %d dimensions are supported", FS_MAX_RANK / 2);
    return NULL;
  }
  int64_t inner[FS_MAX_RANK], big[FS_MAX_RANK], out[FS_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    int k = i - (rank - x->rank);
    int64_t have = k >= 0 ? x->shape[k] : 1;
    inner[2 * i] = 1, inner[2 * i + 1] = have;
    big[2 * i] = reps[i], big[2 * i + 1] = have;
    out[i] = reps[i] * have;
  }
  fs_tensor *v = fsG_reshape(x, 2 * rank, inner), *e = v ? fsG_expand(v, 2 * rank, big) : NULL;
  fs_tensor *r = e ? fsG_reshape(e, rank, out) : NULL;
  fsT_release(v);
  fsT_release(e);
  return fsE_tensor_value(r);
}

/* tensors of a list/tuple value (borrowed) */
static int tensor_list(const fs_value *v, fs_tensor **ts, int max, const char *fn) {
  if (v->type != FSV_LIST && v->type != FSV_TUPLE) {
    fsV_seterr("%s(): argument 'tensors' must be tuple of Tensors, not %s", fn, fsV_type_name(v));
    return -1;
  }
  if ((int)v->u.seq.n > max) {
    fsV_seterr("%s(): at most %d tensors are supported", fn, max);
    return -1;
  }
  for (size_t i = 0; i < v->u.seq.n; i++)
    if (!(ts[i] = fsE_as_tensor(v->u.seq.items[i]))) {
      fsV_seterr("expected Tensor as element %zu in argument 0, but got %s", i, fsV_type_name(v->u.seq.items[i]));
      return -1;
    }
  return (int)v->u.seq.n;
}

#define MAX_CAT 1024

NATIVE(b_cat) {
  fs_tensor *ts[MAX_CAT];
  int d, n = tensor_list(s[0], ts, MAX_CAT, "cat");
  if (n < 0 || fsE_dim_arg(s[1], &d) < 0) return NULL;
  return fsE_tensor_value(fsG_cat(ts, n, d));
}

NATIVE(b_stack) {
  fs_tensor *ts[MAX_CAT], *us[MAX_CAT];
  int d, n = tensor_list(s[0], ts, MAX_CAT, "stack");
  if (n < 0 || fsE_dim_arg(s[1], &d) < 0) return NULL;
  if (n == 0) {
    fsV_seterr("stack expects a non-empty TensorList");
    return NULL;
  }
  int r = ts[0]->rank + 1;
  if (d < -r || d >= r) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, d);
    return NULL;
  }
  if (d < 0) d += r;
  for (int i = 0; i < n; i++)
    if (!fsT_same_shape(ts[i], ts[0])) {
      char a_[96], b[96];
      fsV_seterr("stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %d",
                 fsT_shape_str(ts[0], a_, sizeof a_), fsT_shape_str(ts[i], b, sizeof b), i);
      return NULL;
    }
  int64_t dims[FS_MAX_RANK + 1];
  for (int i = 0, k = 0; i < r; i++) dims[i] = i == d ? 1 : ts[0]->shape[k++];
  int made = 0;
  fs_tensor *out = NULL;
  for (; made < n; made++)
    if (!(us[made] = fsG_reshape(ts[made], r, dims))) break;
  if (made == n) out = fsG_cat(us, n, d);
  for (int i = 0; i < made; i++) fsT_release(us[i]);
  return fsE_tensor_value(out);
}

/* split(split_size_or_sections, dim=0) and chunk(chunks, dim=0): tuples of slices */
static fs_value *pieces(fs_tensor *x, const int64_t *len, int n, int d) {
  fs_value *tu = fsV_tuple((size_t)n);
  int64_t at = 0;
  for (int i = 0; tu && i < n; i++) {
    fs_value *v = fsE_tensor_value(fsG_slice(x, d, at, at + len[i], 1));
    if (!v) {
      tu->u.seq.n = (size_t)i;
      fsV_release(tu);
      return NULL;
    }
    fsV_seq_set(tu, (size_t)i, v);
    at += len[i];
  }
  return tu;
}

#define MAX_PIECES 4096

NATIVE(t_split) {
  fs_tensor *x = TENSOR(self);
  int d;
  if (fsE_dim_arg(s[1], &d) < 0) return NULL;
  int r = x->rank ? x->rank : 1;
  if (d < -r || d >= r || x->rank == 0) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, d);
    return NULL;
  }
  if (d < 0) d += r;
  int64_t L = x->shape[d], len[MAX_PIECES];
  int n = 0;
  if (s[0]->type == FSV_LIST || s[0]->type == FSV_TUPLE) {
    int64_t total = 0;
    for (size_t i = 0; i < s[0]->u.seq.n && i < MAX_PIECES; i++) total += len[n++] = fsE_ival(s[0]->u.seq.items[i]);
    if (total != L) {
      fsV_seterr("split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's size at dimension %d), but got split_sizes=%s",
                 (long long)L, d, "[...]");
      return NULL;
    }
  } else {
    int64_t k = fsE_ival(s[0]);
    if (k <= 0 && L > 0) {
      fsV_seterr("split_size can only be 0 if dimension size is 0, but got dimension size of %lld", (long long)L);
      return NULL;
    }
    for (int64_t at = 0; at < L && n < MAX_PIECES; at += k) len[n++] = at + k <= L ? k : L - at;
  }
  return pieces(x, len, n, d);
}

NATIVE(t_chunk) {
  fs_tensor *x = TENSOR(self);
  int64_t chunks = fsE_ival(s[0]);
  int d;
  if (fsE_dim_arg(s[1], &d) < 0) return NULL;
  if (chunks <= 0) {
    fsV_seterr("chunk expects `chunks` to be greater than 0, got: %lld", (long long)chunks);
    return NULL;
  }
  int r = x->rank ? x->rank : 1;
  if (d < -r || d >= r || x->rank == 0) {
    fsV_seterr("Dimension out of range (expected to be in range of [%d, %d], but got %d)", -r, r - 1, d);
    return NULL;
  }
  if (d < 0) d += r;
  int64_t L = x->shape[d], k = (L + chunks - 1) / chunks, len[MAX_PIECES];
  int n = 0;
  for (int64_t at = 0; at < L && n < MAX_PIECES; at += k) len[n++] = at + k <= L ? k : L - at;
  return pieces(x, len, n, d);
}

static const fsE_reg shape_funcs[] = {
  {"cat", b_cat}, {"stack", b_stack}, {"Tensor.view", t_view}, {"Tensor.reshape", t_reshape},
  {"Tensor.contiguous", t_contiguous}, {"Tensor.permute", t_permute}, {"Tensor.transpose", t_transpose},
  {"Tensor.T", t_T}, {"Tensor.mT", t_mT}, {"Tensor.unsqueeze", t_unsqueeze}, {"Tensor.squeeze", t_squeeze},
  {"Tensor.flatten", t_flatten}, {"flatten", t_flatten}, {"Tensor.expand", t_expand}, {"Tensor.repeat", t_repeat},
  {"Tensor.split", t_split}, {"Tensor.chunk", t_chunk},
  {NULL, NULL},
};
const fsE_lib fsE_lib_shape = {"shape", shape_funcs};
