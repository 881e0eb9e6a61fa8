/* test_ckpt_python.c -- Python reads what we write: a checkpoint parsed with
 * json + struct + numpy (and the safetensors package when installed), and
 * the DistributedSampler index lists checked against PyTorch's when torch is
 * installed. Exit 77 (skip) without /usr/bin/python3 and numpy. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "datatest.h"
#include "loader.h"
#include "safetensors.h"

#define PYTHON "OPENBLAS_NUM_THREADS=1 /usr/bin/python3"

static const char script[] =
  "import sys, json, struct\n"
  "import numpy as np\n"
  "raw = open(sys.argv[1], 'rb').read()\n"
  "n, = struct.unpack('<Q', raw[:8])\n"
  "assert (8 + n) % 8 == 0, n\n"
  "hdr = json.loads(raw[8:8 + n].decode('utf-8'))\n"
  "meta = hdr.pop('__metadata__')\n"
  "assert meta == {'format': 'pt', 'note': 'caf\\u00e9'}, meta\n"
  "data = raw[8 + n:]\n"
  "assert sorted(hdr) == ['bias', 'fc.weight', 'step'], sorted(hdr)\n"
  "def arr(name):\n"
  "    e = hdr[name]\n"
  "    b, end = e['data_offsets']\n"
  "    buf = data[b:end]\n"
  "    if e['dtype'] == 'F32': a = np.frombuffer(buf, '<f4')\n"
  "    elif e['dtype'] == 'I64': a = np.frombuffer(buf, '<i8')\n"
  "    else: a = (np.frombuffer(buf, '<u2').astype(np.uint32) << 16).view(np.float32)\n"
  "    return a.reshape(e['shape'])\n"
  "w = arr('fc.weight')\n"
  "assert w.dtype == np.float32 and w.shape == (3, 4)\n"
  "assert np.array_equal(w, np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1), w\n"
  "b = arr('bias')\n"
  "assert hdr['bias']['dtype'] == 'BF16' and np.array_equal(b, [1, -2, 0.25, 384]), b\n"
  "s = arr('step')\n"
  "assert s.shape == () and int(s) == -(2**40 + 7), s\n"
  "try:\n"
  "    from safetensors.numpy import load_file\n"
  "except ImportError:\n"
  "    print('safetensors package not installed: checked with json + struct + numpy')\n"
  "else:\n"
  "    t = load_file(sys.argv[1])\n"
  "    assert np.array_equal(t['fc.weight'], w) and int(t['step']) == int(s)\n"
  "try:\n"
  "    from torch.utils.data.distributed import DistributedSampler\n"
  "except ImportError:\n"
  "    print('torch not installed: DistributedSampler lists not cross-checked')\n"
  "    sys.exit(0)\n"
  "for case in json.load(open(sys.argv[2])):\n"
  "    s = DistributedSampler(range(case['n']), num_replicas=case['world'], rank=case['rank'],\n"
  "                           shuffle=False, drop_last=case['drop_last'])\n"
  "    assert list(s) == case['indices'], (case, list(s))\n"
  "    assert len(s) == len(case['indices'])\n";

static int run_python(const char *dir, const char *ckpt, const char *cases) {
  char *py = dt_path(dir, "check.py");
  dt_write(py, script, sizeof script - 1);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, PYTHON " %s %s %s", py, ckpt, cases);
  int st = system(cmd);
  free(py);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The unshuffled per-rank index lists, as JSON. */
static void write_sampler_cases(const char *path) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputc('[', f);
  const int64_t sizes[] = {1, 5, 10, 11, 13};
  int first = 1;
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
    for (int world = 1; world <= 4; world++)
      for (int drop = 0; drop < 2; drop++)
        for (int rank = 0; rank < world; rank++) {
          fsS_dataset ds;
          fsDL_loader L;
          char *err = NULL;
          int64_t shape[1] = {1};
          assert_int_equal(fsS_random(&ds, sizes[si], 1, shape, 2, 0, &err), 0);
          assert_int_equal(fsDL_init(&L, &ds, 1, false, false, 0, &err), 0);
          assert_int_equal(fsDL_distribute(&L, rank, world, false, 0, drop, &err), 0);
          fprintf(f, "%s{\"n\":%lld,\"world\":%d,\"rank\":%d,\"drop_last\":%s,\"indices\":[",
                  first ? "" : ",", (long long)sizes[si], world, rank, drop ? "true" : "false");
          for (size_t k = 0; k < L.num_samples; k++)
            fprintf(f, "%s%zu", k ? "," : "", fsDL_index(&L, k));
          fputs("]}", f);
          first = 0;
          fsDL_free(&L);
        }
  fputc(']', f);
  assert_int_equal(fclose(f), 0);
}

static void test_python_reads_our_files(void **state) {
  char *dir = dt_mkdtemp(), *ckpt = dt_path(dir, "model.safetensors");
  char *cases = dt_path(dir, "sampler.json"), *err = NULL;
  float w[12];
  for (int i = 0; i < 12; i++) w[i] = (float)i * 0.5f - 1;
  uint16_t bias[4] = {0x3f80, 0xc000, 0x3e80, 0x43c0};
  int64_t step = -((int64_t)1 << 40) - 7;
  const int64_t ws[2] = {3, 4}, bs[1] = {4};
  fsK_entry es[3] = {{"fc.weight", FS_F32, 2, ws, w}, {"bias", FS_BF16, 1, bs, bias},
                     {"step", FS_I64, 0, NULL, &step}};
  fsK_meta meta[2] = {{"format", "pt"}, {"note", "caf\xc3\xa9"}};
  if (fsK_save(ckpt, es, 3, meta, 2, &err) != 0) fail_msg("%s", err);
  write_sampler_cases(cases);
  assert_int_equal(run_python(dir, ckpt, cases), 0);
  free(ckpt);
  free(cases);
  dt_rmdir(dir);
}

int main(void) {
  if (access("/usr/bin/python3", X_OK) != 0 ||
      system(PYTHON " -c 'import numpy' 2>/dev/null") != 0) {
    fputs("test_ckpt_python: skipped: /usr/bin/python3 with numpy is not available\n", stderr);
    return 77;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_python_reads_our_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
