/* test_eval.c -- the evaluator on small scripts: output, errors with their
 * locations, -D parameters, model state-dict names, Fabric rules at run time. */
#define _POSIX_C_SOURCE 200809L /* open_memstream, mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <unistd.h>

#include "eval.h"
#include "safetensors.h"
#include "lex.h"
#include "zipstore.h"

typedef struct result {
  int status;
  char *out;   /* stdout */
  char *diags; /* "LINE:COL: severity: message\n" per diagnostic */
} result;

static result run(const char *text, const char *const *defines, size_t ndefines) {
  result r = {0};
  fs_source *src = fsA_source_from_buffer("t.fab", text, strlen(text));
  fs_diags d;
  fsD_init(&d);
  int nerr = 0;
  fs_node *ast = fsP_parse(src, &d, &nerr);
  assert_int_equal(nerr, 0);
  size_t olen, dlen;
  FILE *out = open_memstream(&r.out, &olen), *dg = open_memstream(&r.diags, &dlen);
  fsE_options o = {.defines = defines, .ndefines = ndefines, .out = out};
  r.status = fsE_run(src, ast, &o, &d);
  for (size_t i = 0; i < d.n; i++) {
    uint32_t line = 0, col = 0;
    if (d.items[i].src) fsA_source_position(src, d.items[i].loc.start, &line, &col);
    fprintf(dg, "%u:%u: %s: %s\n", line, col,
            d.items[i].severity == FS_SEV_ERROR ? "error" : d.items[i].severity == FS_SEV_WARNING ? "warning" : "note",
            d.items[i].message);
  }
  fclose(out);
  fclose(dg);
  fsA_free(ast);
  fsD_free(&d);
  fsA_source_free(src);
  return r;
}

static void expect(const char *text, int status, const char *out, const char *diags) {
  result r = run(text, NULL, 0);
  assert_string_equal(r.out, out);
  assert_string_equal(r.diags, diags);
  assert_int_equal(r.status, status);
  free(r.out);
  free(r.diags);
}

static void test_statements(void **st) {
  (void)st;
  expect("x = 0\n"
         "for i in range(10):\n"
         "    if i % 2 == 0:\n"
         "        continue\n"
         "    elif i > 7:\n"
         "        break\n"
         "    x += i\n"
         "print(x, i)\n"
         "a, (b, c) = 1, [2, 3]\n"
         "print(a + b + c, sep='', end='!\\n')\n"
         "d = {}\n"
         "d['k'] = [1]\n"
         "d['k'][0] = 5\n"
         "print(d, len(d))\n",
         0, "16 9\n6!\n{'k': [5]} 1\n", "");
}

static void test_functions(void **st) {
  (void)st;
  expect("def add(a, b=10):\n"
         "    return a + b\n"
         "def noret():\n"
         "    pass\n"
         "print(add(1), add(1, 2), add(b=1, a=5), noret())\n",
         0, "11 3 6 None\n", "");
  expect("def f(n):\n"
         "    return f(n - 1)\n"
         "f(3)\n",
         1, "", "2:12: error: recursion is not supported: `f` calls itself\n");
  expect("def f(a):\n"
         "    return a\n"
         "f(1, 2)\n",
         1, "", "3:1: error: f() takes 1 positional argument (2 given)\n");
  expect("print(1, x=2)\n", 1, "", "1:1: error: print() got an unexpected keyword argument 'x'\n");
  expect("SGD([], momentum=0.9)\n", 1, "", "1:1: error: SGD() missing required argument 'lr'\n");
  expect("Linear('784', 10)\n", 1, "",
         "1:1: error: Linear() argument 'in_features' must be int, not str\n");
}

static void test_errors(void **st) {
  (void)st;
  expect("print(1)\ny = x + 1\n", 1, "1\n", "2:5: error: name 'x' is not defined\n");
  expect("x = 1 / 0\n", 1, "", "1:5: error: division by zero\n");
  expect("a, b = 1, 2, 3\n", 1, "", "1:1: error: too many values to unpack (expected 2)\n");
  expect("a, b = 5\n", 1, "", "1:1: error: cannot unpack non-iterable int object\n");
  expect("assert 1 == 2, 'one is not two'\n", 1, "", "1:1: error: AssertionError: one is not two\n");
  expect("x = 9223372036854775807\nx += 1\n", 1, "",
         "2:1: error: integer overflow: the result does not fit in 64 bits\n");
  expect("with 3:\n    pass\n", 1, "",
         "1:6: error: 'int' object does not support the context manager protocol\n");
  expect("[1].nope()\n", 1, "", "1:5: error: 'list' object has no attribute 'nope'\n");
  expect("print(list(zip()), list(enumerate([])))\n", 0, "[] []\n", "");
  expect("l = [1]\nl.append([2, l])\n", 1, "",
         "2:3: error: a container cannot hold itself (reference cycles are not supported)\n");
  expect("d = {}\nd['k'] = {'x': d}\n", 1, "",
         "2:1: error: a container cannot hold itself (reference cycles are not supported)\n");
  /* the data module's message, and nothing of the failed data set left behind */
  expect("TextDataset('/nonexistent/t.txt', 8)\n", 1, "",
         "1:1: error: /nonexistent/t.txt: cannot open: No such file or directory\n");
  expect("x = 3\nx.lr = 1\n", 1, "", "2:3: error: 'int' object attribute 'lr' cannot be set\n");
}

/* A script Module class's mistakes, each stopping the run with its own words. */
static void test_classes(void **st) {
  (void)st;
#define HOLDER "class H(Module):\n    def __init__(self, layer):\n        super().__init__()\n" \
               "        self.layer = layer\n    def forward(self, x):\n        return self.layer(x)\n"
  expect("class N(Module):\n    pass\nN()(ones(1))\n", 1, "",
         "3:1: error: Module [N] is missing the required \"forward\" function\n");
  expect(HOLDER "s = Linear(2, 2)\na = H(s)\nb = H(s)\n", 1, "",
         "4:14: error: this Linear is already part of a model; create a new one for each use\n");
  expect(HOLDER "a = H(Linear(2, 2))\na.layer = 3\n", 1, "",
         "8:3: error: cannot assign 'int' as child module 'layer' (torch.nn.Module or None expected)\n");
  expect(HOLDER "a = H(Linear(2, 2))\na.me = [a]\n", 1, "",
         "8:3: error: an object cannot hold itself as attribute 'me' (reference cycles are not supported)\n");
  expect(HOLDER "a = H(Linear(2, 2))\na.f = a.forward\n", 1, "",
         "8:3: error: an object cannot hold itself as attribute 'f' (reference cycles are not supported)\n");
  /* on meta the layers' parameters stay meta; the class's own tensors are made on the CPU */
  expect(HOLDER "with device('meta'):\n    print(H(Linear(2, 2)), H(Linear(2, 2)).layer.weight.device)\n", 0,
         "H(6 parameters, on meta) meta\n", "");
  expect(HOLDER "a = H(Linear(2, 2))\na.zz\n", 1, "", "8:3: error: 'Module' object has no attribute 'zz'\n");
  expect(HOLDER "a = H(ReLU())\nprint(a(ones(2)).shape, len(a.parameters()))\n", 0, "(2,) 0\n", "");
  expect(HOLDER "print(isinstance(H(ReLU()), Module), isinstance(ReLU(), Module), isinstance(3, Module))\n", 0,
         "True True False\n", "");
  expect("class A:\n    pass\nA(1)\n", 1, "", "3:1: error: A() takes no arguments\n");
  expect("class A:\n    def __init__(self):\n        return 1\nA()\n", 1, "",
         "4:1: error: __init__() should return None, not 'int'\n");
  expect("class A(3):\n    pass\n", 1, "", "1:9: error: a class can derive from a class or Module, not int "
         "(built-in types are not supported as bases at run time yet)\n");
  expect("super()\n", 1, "", "1:1: error: super(): no arguments\n");
  expect("class A:\n    x = 1\nprint(A.x)\nA.y\n", 1, "1\n", "4:3: error: type object 'A' has no attribute 'y'\n");
  expect("f = lambda x: x + 1\nprint(f(1), [f(i) for i in range(3)], {i: 0 for i in []})\n", 0, "2 [1, 2, 3] {}\n", "");
  expect("print([x for x in 3])\n", 1, "", "1:19: error: 'int' object is not iterable\n");
#undef HOLDER
}

/* try/except/else/finally and raise at run time (the checker, which runs
 * before a script and the REPL's entries, does not know exception names yet). */
static void test_try(void **st) {
  (void)st;
  expect("def risky(k):\n"
         "    if k == 0:\n        return 1 / k\n"
         "    if k == 1:\n        raise ValueError(f'bad k {k}')\n"
         "    return [1][k]\n"
         "for k in range(4):\n"
         "    try:\n        print(risky(k - 1))\n"
         "    except ZeroDivisionError as e:\n        print('zero:', e)\n"
         "    except (ValueError, TypeError) as e:\n        print('value:', e)\n"
         "    except LookupError as e:\n        print('lookup:', e)\n"
         "    else:\n        print('else')\n"
         "    finally:\n        print('finally', k)\n",
         0, "1\nelse\nfinally 0\nzero: division by zero\nfinally 1\nvalue: bad k 1\nfinally 2\n"
            "lookup: list index out of range\nfinally 3\n", "");
  expect("try:\n    x = {}['m']\nexcept Exception as e:\n    print('caught', e)\n", 0, "caught 'm'\n", "");
  expect("def f():\n    try:\n        return 5\n    finally:\n        print('cleanup')\nprint(f())\n", 0,
         "cleanup\n5\n", "");
  expect("try:\n    try:\n        assert False, 'inner'\n    except KeyError:\n        print('no')\n"
         "except AssertionError as e:\n    print('outer', e)\n", 0, "outer inner\n", "");
  expect("try:\n    zeros(2, 3) + zeros(4)\nexcept RuntimeError as e:\n    print('torch')\n", 0, "torch\n", "");
  /* not caught: reported where it happened, after the finally ran */
  expect("try:\n    1 / 0\nexcept KeyError:\n    pass\nfinally:\n    print('f')\n", 1, "f\n",
         "2:5: error: division by zero\n");
  expect("try:\n    1 / 0\nexcept ZeroDivisionError:\n    raise\n", 1, "", "4:5: error: division by zero\n");
  expect("raise ValueError('no good')\n", 1, "", "1:1: error: ValueError: no good\n");
  expect("raise\n", 1, "", "1:1: error: RuntimeError: No active exception to reraise\n");
  expect("class C:\n    def m(self):\n        raise KeyboardInterrupt\ntry:\n    C().m()\nexcept Exception:\n    print('no')\n",
         130, "", "3:9: error: KeyboardInterrupt\n"); /* 128 + SIGINT, as CPython exits */
}

static void test_params(void **st) {
  (void)st;
  const char *defs[] = {"lr=0.5", "epochs=3", "unused=1"};
  result r = run("lr = param('lr', 1e-3)\nn = param('epochs', 1)\nname = param('name', 'x')\n"
                 "print(lr, n, name)\n",
                 defs, 3);
  assert_string_equal(r.out, "0.5 3 x\n");
  assert_string_equal(r.diags, ""); /* an unused -D is the checker's warning, not reported twice */
  assert_int_equal(r.status, 0);
  free(r.out);
  free(r.diags);
  const char *bad[] = {"epochs=three"};
  r = run("n = param('epochs', 1)\n", bad, 1);
  assert_int_equal(r.status, 2);
  assert_string_equal(r.diags, "1:5: error: -D epochs=three: expected an int, got 'three'\n");
  free(r.out);
  free(r.diags);
}

static void test_fstrings(void **st) {
  (void)st;
  expect("loss = 0.123456\nn = 60000\nacc = 0.8567\n"
         "print(f'loss {loss:.4f} n={n:,} acc={acc:.2%} [{3.14159:>8.3f}]')\n",
         0, "loss 0.1235 n=60,000 acc=85.67% [   3.142]\n", "");
  expect("print(f'{1.5:d}')\n", 1, "", "1:9: error: Unknown format code 'd' for object of type 'float'\n");
}

static void test_model_names(void **st) {
  (void)st;
  expect("model Block(dim):\n"
         "    residual:\n"
         "        LayerNorm(dim)\n"
         "        Linear(dim, dim)\n"
         "model Net(dim=4, layers=2):\n"
         "    wte = Embedding(10, dim)\n"
         "    h = repeat layers:\n"
         "        Block(dim)\n"
         "    Linear(dim, 3, bias=False)\n"
         "net = Net()\n"
         "for name, p in net.named_parameters():\n"
         "    print(name, p.shape)\n"
         "print(net.num_parameters(), len(net.parameters()))\n",
         0,
         "wte.weight (10, 4)\n"
         "h.0.0.0.weight (4,)\nh.0.0.0.bias (4,)\nh.0.0.1.weight (4, 4)\nh.0.0.1.bias (4,)\n"
         "h.1.0.0.weight (4,)\nh.1.0.0.bias (4,)\nh.1.0.1.weight (4, 4)\nh.1.0.1.bias (4,)\n"
         "2.weight (3, 4)\n"
         "108 10\n",
         "");
  expect("lin = Linear(2, 2)\n"
         "model M():\n"
         "    lin\n"
         "    lin\n"
         "M()\n",
         1, "", "4:5: error: this Linear is already part of a model; create a new one for each use\n");
  expect("repeat 2:\n    ReLU()\n", 1, "", "1:1: error: `repeat` is only allowed in a model body\n");
}

static void test_meta_and_fabric(void **st) {
  (void)st;
  /* parameters made under device("meta") have no storage until to_empty */
  expect("with device('meta'):\n"
         "    m = Linear(3, 2)\n"
         "print(m)\n"
         "m.to_empty(device=device('cpu'))\n"
         "print(m)\n",
         0, "Linear(8 parameters, on meta)\nLinear(8 parameters)\n", "");
  /* the runtime Fabric object runs fabric.h's validations (R26) */
  expect("fabric = Fabric(accelerator='cpu', devices=1)\n"
         "print(fabric.world_size, fabric.is_global_zero)\n"
         "fabric.setup_optimizers()\n",
         1, "1 True\n",
         "3:24: error: `setup_optimizers` requires at least one optimizer as input.\n");
}

static void test_checkpoint(void **st) {
  (void)st;
  char path[] = "/tmp/test_eval_ckptXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  char text[2048];
  snprintf(text, sizeof text,
           "model Tiny():\n"
           "    fc = Linear(4, 3)\n"
           "fabric = Fabric(accelerator='cpu', devices=1)\n"
           "model = fabric.setup_module(Tiny())\n"
           "opt = fabric.setup_optimizers(SGD(model.parameters(), lr=0.5, momentum=0.9))\n"
           "for x, y in DataLoader(RandomDataset(8, 4, 3, 0), batch_size=4):\n"
           "    fabric.backward(cross_entropy(model(x), y))\n"
           "    opt.step()\n"
           "fabric.save('%s', {'model': model, 'opt': opt, 'epoch': 3})\n"
           "w = model.parameters()[0].sum().item()\n"
           "model.reset_parameters()\n"
           "opt.lr = 0.1\n"
           "state = {'model': model, 'opt': opt}\n"
           "rest = fabric.load('%s', state)\n"
           "print(model.parameters()[0].sum().item() == w, opt.lr, rest)\n"
           "fabric.load('%s', {'model': Linear(2, 2)})\n",
           path, path, path);
  result r = run(text, NULL, 0);
  assert_string_equal(r.out, "True 0.5 {'epoch': 3}\n");
  assert_int_equal(r.status, 1); /* the last load: the file has no tensors of that shape */
  if (!strstr(r.diags, "16:8: error: ") || !strstr(r.diags, "model.weight")) fail_msg("diags: %s", r.diags);
  free(r.out);
  free(r.diags);
  unlink(path);
}

/* A .pt whose pickle calls os.system: fabric.load refuses it naming the
 * global, runs nothing, and leaves the model as it was. (A regression script
 * cannot make such a file; here zipstore.h writes it.) */
static void test_checkpoint_hostile(void **st) {
  (void)st;
  char dir[] = "/tmp/test_eval_ckptXXXXXX", path[64], marker[64], text[1024];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/evil.pt", dir);
  snprintf(marker, sizeof marker, "%s/ran", dir);
  char pkl[128]; /* os.system("touch <marker>"), as pickle protocol 2 */
  size_t cmd = strlen("touch ") + strlen(marker), n = 0;
  n += (size_t)snprintf(pkl + n, sizeof pkl - n, "\x80\x02" "cos\nsystem\n" "X");
  for (int b = 0; b < 4; b++) pkl[n++] = (char)(cmd >> (8 * b));
  n += (size_t)snprintf(pkl + n, sizeof pkl - n, "touch %s\x85R.", marker);
  const char *names[] = {"evil/data.pkl", "evil/version"};
  uint64_t sizes[] = {n, 2};
  fsZ_writer w;
  char *err = NULL;
  assert_int_equal(fsZ_create(&w, path, names, sizes, 2, &err), 0);
  assert_int_equal(fsZ_write(&w, 0, 0, pkl, n, &err), 0);
  assert_int_equal(fsZ_write(&w, 1, 0, "3\n", 2, &err), 0);
  assert_int_equal(fsZ_commit(&w, &err), 0);
  snprintf(text, sizeof text,
           "fabric = Fabric(accelerator='cpu', devices=1)\n"
           "model = fabric.setup_module(Linear(2, 2))\n"
           "w = model.parameters()[0].sum().item()\n"
           "print(w == w)\n"
           "fabric.load('%s', {'model': model})\n",
           path);
  result r = run(text, NULL, 0);
  char want[512];
  snprintf(want, sizeof want,
           "5:8: error: %s: data.pkl: unsupported global os.system (only what torch.load(weights_only=True) "
           "accepts is loaded) at byte 2\n", path);
  assert_string_equal(r.diags, want);
  assert_int_equal(r.status, 1);
  assert_int_equal(access(marker, F_OK), -1);
  free(r.out);
  free(r.diags);
  unlink(path);
  rmdir(dir);
}

/* A checkpoint written before the optimizer layout followed torch's state
 * dict keeps its learning rate as metadata "K.lr"; loading must restore it
 * (it was silently dropped when only "K.param_groups.0.lr" was read). */
static void test_checkpoint_old_optimizer_layout(void **st) {
  (void)st;
  char dir[] = "/tmp/test_eval_ckptXXXXXX", path[64], text[1024];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/old.safetensors", dir);
  static const float w[4] = {1, 2, 3, 4}, b[2] = {0, 0};
  static const int64_t ws[2] = {2, 2}, bs[1] = {2};
  const fsK_entry ts[] = {{"model.weight", FS_F32, 2, ws, w}, {"model.bias", FS_F32, 1, bs, b}};
  const fsK_meta meta[] = {{"opt.lr", "0.25"}, {"opt.state.0.step", "3"}, {"opt.state.1.step", "3"}};
  char *err = NULL;
  assert_int_equal(fsK_save(path, ts, 2, meta, 3, &err), 0);
  snprintf(text, sizeof text,
           "fabric = Fabric(accelerator='cpu', devices=1)\n"
           "model = Linear(2, 2)\n"
           "opt = SGD(model.parameters(), lr=0.01)\n"
           "model, opt = fabric.setup(model, opt)\n"
           "fabric.load('%s', {'model': model, 'opt': opt})\n"
           "print(opt.lr, model.parameters()[0].sum().item())\n",
           path);
  result r = run(text, NULL, 0);
  assert_string_equal(r.diags, "");
  assert_string_equal(r.out, "0.25 10.0\n");
  assert_int_equal(r.status, 0);
  free(r.out);
  free(r.diags);
  unlink(path);
  rmdir(dir);
}

/* fabric.load and load_state_dict are all-or-nothing (issue 18, point 3):
 * each bad checkpoint below fails with its error, and the model, the
 * optimizer (its state and its group dicts) and the state dict are exactly
 * as before, in one session as the REPL runs them. Before, an optimizer
 * state of the wrong shape or missing was skipped, a step "abc" became 0
 * and -5 was taken (NaN weights at the next step), unparsable metadata was
 * dropped, and the model was overwritten before the optimizer failed. */
static void test_checkpoint_all_or_nothing(void **st) {
  (void)st;
  char dir[] = "/tmp/test_eval_ckptXXXXXX", text[8192];
  assert_non_null(mkdtemp(dir));
  /* each entry after the first two: one load that must fail, then the
   * state printed again, which must be what the first print showed */
  snprintf(text, sizeof text,
    "fabric = Fabric(accelerator='cpu', devices=1)\n"
    "model = Linear(2, 2)\n"
    "opt = Adam(model.parameters(), lr=0.01)\n"
    "model, opt = fabric.setup(model, opt)\n"
    "fabric.backward(model(ones(3, 2)).sum())\n"
    "opt.step()\n"
    "state = {'model': model, 'opt': opt, 'n': 1}\n"
    "def show():\n"
    "    sd = opt.state_dict()\n"
    "    print(model.parameters()[0].sum().item(), opt.param_groups[0]['lr'], state['n'], sd['state'][0]['step'].item(), sd['state'][0]['exp_avg'].sum().item())\n"
    "def good(step, avg, lr):\n"
    "    return {'state': {0: {'step': step, 'exp_avg': avg, 'exp_avg_sq': ones(2, 2)}, 1: {'step': tensor(1.0), 'exp_avg': zeros(2), 'exp_avg_sq': zeros(2)}}, 'param_groups': [{'lr': lr, 'betas': (0.9, 0.999), 'eps': 1e-8, 'weight_decay': 0, 'amsgrad': False, 'maximize': False, 'foreach': None, 'capturable': False, 'params': [0, 1]}]}\n"
    "m = {'weight': ones(2, 2) * 7, 'bias': zeros(2)}\n"
    "fabric.save('%1$s/shape.ckpt', {'model': m, 'opt': good(tensor(1.0), ones(3), 0.5), 'n': 2})\n"
    "fabric.save('%1$s/abc.ckpt', {'model': m, 'opt': good('abc', ones(2, 2), 0.5), 'n': 2})\n"
    "fabric.save('%1$s/neg.ckpt', {'model': m, 'opt': good(-5, ones(2, 2), 0.5), 'n': 2})\n"
    "fabric.save('%1$s/frac.ckpt', {'model': m, 'opt': good(1.5, ones(2, 2), 0.5), 'n': 2})\n"
    "bad = good(tensor(1.0), ones(2, 2), 0.5)\n"
    "bad['state'][1] = {'step': tensor(1.0), 'exp_avg': zeros(2)}\n"
    "fabric.save('%1$s/missing.ckpt', {'model': m, 'opt': bad, 'n': 2})\n"
    "fabric.save('%1$s/lr.ckpt', {'model': m, 'opt': good(tensor(1.0), ones(2, 2), 'x'), 'n': 2})\n"
    "fabric.save('%1$s/meta.safetensors', {'model': model, 'opt': opt, 'n': 1e999})\n"
    "show()\n"
    "fabric.load('%1$s/shape.ckpt', state)\n"
    "fabric.load('%1$s/abc.ckpt', state)\n"
    "fabric.load('%1$s/neg.ckpt', state)\n"
    "fabric.load('%1$s/frac.ckpt', state)\n"
    "fabric.load('%1$s/missing.ckpt', state)\n"
    "fabric.load('%1$s/lr.ckpt', state)\n"
    "fabric.load('%1$s/meta.safetensors', state)\n"
    "opt.load_state_dict(good(tensor(1.0), ones(3), 0.5))\n"
    "opt.load_state_dict(good(-5, ones(2, 2), 0.5))\n"
    "model.load_state_dict({'weight': ones(2, 2) * 7})\n"
    "show()\n",
    dir);
  fs_source *src = fsA_source_from_buffer("t.fab", text, strlen(text));
  fs_diags d;
  fsD_init(&d);
  int nerr = 0;
  fs_node *ast = fsP_parse(src, &d, &nerr);
  assert_int_equal(nerr, 0);
  char *out = NULL;
  size_t olen;
  FILE *o = open_memstream(&out, &olen);
  fsE_options opt = {.out = o};
  fsE_session *S = fsE_session_new(&opt);
  assert_non_null(S);
  static const char *const errors[] = {
    "optimizer state 0: 'exp_avg' must be a tensor of shape [2, 2], got [3]",
    "optimizer state 0: 'step' must be a non-negative integer, got 'abc'",
    "optimizer state 0: 'step' must be a non-negative integer, got -5",
    "optimizer state 0: 'step' must be a non-negative integer, got 1.5",
    "optimizer state 1 has no 'exp_avg_sq'",
    "param_groups[0] 'lr' must be a number, not str",
    "the metadata of 'n' is not a Python literal",
    "optimizer state 0: 'exp_avg' must be a tensor of shape [2, 2], got [3]",
    "optimizer state 0: 'step' must be a non-negative integer, got -5",
    "Missing key(s) in state_dict: \"bias\"",
  };
  size_t nstmt = ast->nkids, first_load = nstmt - 1 - sizeof errors / sizeof *errors;
  for (size_t i = 0; i < nstmt; i++) {
    size_t before = d.n;
    int rc = fsE_session_exec(S, src, &ast->kids[i], 1, &d, 0);
    bool should_fail = i >= first_load && i < nstmt - 1;
    if (!should_fail) {
      if (rc != 0) fail_msg("statement %zu failed: %s", i + 1, d.n ? d.items[d.n - 1].message : "?");
      continue;
    }
    assert_int_equal(rc, 1);
    assert_int_equal(d.n, before + 1);
    if (!strstr(d.items[before].message, errors[i - first_load]))
      fail_msg("statement %zu: \"%s\" does not say \"%s\"", i + 1, d.items[before].message, errors[i - first_load]);
  }
  fsE_session_free(S);
  fclose(o);
  /* two prints, the same */
  char *nl = strchr(out, '\n');
  assert_non_null(nl);
  assert_int_equal(strlen(nl + 1), (size_t)(nl + 1 - out));
  assert_memory_equal(out, nl + 1, (size_t)(nl + 1 - out));
  free(out);
  fsA_free(ast);
  fsD_free(&d);
  fsA_source_free(src);
  const char *files[] = {"shape.ckpt", "abc.ckpt", "neg.ckpt", "frac.ckpt", "missing.ckpt", "lr.ckpt", "meta.safetensors"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

static void test_log(void **st) {
  (void)st;
  char dir[] = "/tmp/test_eval_logXXXXXX", cwd[4096];
  assert_non_null(mkdtemp(dir));
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(dir), 0);
  result r = run("fabric = Fabric(accelerator='cpu', devices=1)\n"
                 "for step in range(2):\n"
                 "    fabric.log('loss', 1.0 / (step + 1), step=step)\n"
                 "    fabric.log_dict({'acc': 0.5, 'n': step})\n"
                 "fabric.log('bad', 'x')\n",
                 NULL, 0);
  assert_string_equal(r.diags, "5:8: error: log: bad must be a number or a one-element tensor, not str\n"
                               "0:0: note: CSVLogger: metrics in logs/version_0/ (metrics.csv, metrics.svg)\n");
  assert_int_equal(r.status, 1);
  free(r.out);
  free(r.diags);
  /* log_dict without step= takes the number of earlier log calls, as CSVLogger */
  FILE *f = fopen("logs/version_0/metrics.csv", "r");
  assert_non_null(f);
  char csv[256] = {0};
  size_t n = fread(csv, 1, sizeof csv - 1, f);
  fclose(f);
  assert_true(n > 0);
  assert_string_equal(csv, "step,loss,acc,n\r\n0,1.0,,\r\n1,0.5,0.5,0\r\n3,,0.5,1\r\n");
  assert_int_equal(system("rm -rf logs"), 0);
  assert_int_equal(chdir(cwd), 0);
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_statements), cmocka_unit_test(test_functions),
    cmocka_unit_test(test_errors),     cmocka_unit_test(test_params),
    cmocka_unit_test(test_fstrings),   cmocka_unit_test(test_model_names),
    cmocka_unit_test(test_meta_and_fabric), cmocka_unit_test(test_checkpoint),
    cmocka_unit_test(test_checkpoint_hostile),
    cmocka_unit_test(test_checkpoint_all_or_nothing),
    cmocka_unit_test(test_checkpoint_old_optimizer_layout),
    cmocka_unit_test(test_log),
    cmocka_unit_test(test_classes),
    cmocka_unit_test(test_try),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
