/* test_check.c -- the checker on small scripts: Fabric's rules along paths
 * (branches, loops, def calls), the seed's diagnostic exactly as
 * docs/tutorial.md shows it, its fix-it, and the non-Fabric checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "check.h"
#include "lex.h"

typedef struct run {
  fs_source *src;
  fs_node *ast;
  fs_diags d;
} run;

static void check_with(run *r, const char *text, const fsC_options *o);

/* Checks text as if the target had `gpus` GPUs, with extra options. */
static void check_text(run *r, const char *text, int gpus, const char *const *args, size_t nargs) {
  fsC_options o;
  fsC_options_init(&o);
  o.machine.cuda_gpus = gpus;
  const char *defs[8];
  size_t nd = 0;
  for (size_t i = 0; i < nargs; i++) {
    const char *err = NULL;
    if (!strncmp(args[i], "-D", 2)) { defs[nd++] = args[i] + 2; continue; }
    assert_int_equal(fsC_parse_arg(&o, args[i], NULL, &err), 1);
  }
  o.defines = defs;
  o.ndefines = nd;
  check_with(r, text, &o);
}

/* Checks text with options o (the defines o names must outlive the call). */
static void check_with(run *r, const char *text, const fsC_options *o) {
  r->src = fsA_source_from_buffer("t.fab", text, strlen(text));
  fsD_init(&r->d);
  int nerr = 0;
  r->ast = fsP_parse(r->src, &r->d, &nerr);
  assert_int_equal(nerr, 0);
  fsC_check(r->src, r->ast, o, &r->d);
  fsD_sort(&r->d);
}

static void run_free(run *r) {
  fsA_free(r->ast);
  fsD_free(&r->d);
  fsA_source_free(r->src);
}

/* The i-th diagnostic has this rule, position and message start. */
static const fs_diag *expect(run *r, size_t i, const char *rule, uint32_t line, uint32_t col,
                             const char *msg) {
  assert_true(i < r->d.n);
  const fs_diag *g = &r->d.items[i];
  uint32_t l, c;
  fsA_source_position(r->src, g->loc.start, &l, &c);
  assert_string_equal(g->rule, rule);
  assert_int_equal(l, line);
  assert_int_equal(c, col);
  assert_true(strncmp(g->message, msg, strlen(msg)) == 0);
  return g;
}



static const char seed_before[] =
  "fabric = Fabric(strategy=\"fsdp\", accelerator=\"cuda\", devices=1)\n"
  "fabric.launch()\n"
  "\n"
  "\n"
  "\n"
  "with fabric.init_module(empty_init=True):\n"
  "    model = Linear(8, 8)            # meta\n"
  "optimizer = Adam(model.parameters())\n"
  "model, optimizer = fabric.setup(model, optimizer)  # the joint setup\n"
  "fabric.backward(model(1).sum())\n";

/* Applies the edits of every diagnostic (they do not overlap) to text. */
static char *apply_fixes(const run *r, const char *text) {
  const fs_edit *ed[16];
  size_t ne = 0;
  for (size_t i = 0; i < r->d.n; i++)
    for (size_t j = 0; j < r->d.items[i].nedits && ne < 16; j++) ed[ne++] = &r->d.items[i].edits[j];
  for (size_t i = 1; i < ne; i++)
    for (size_t j = i; j > 0 && ed[j]->loc.start < ed[j - 1]->loc.start; j--) {
      const fs_edit *t = ed[j]; ed[j] = ed[j - 1]; ed[j - 1] = t;
    }
  size_t len = strlen(text), cap = len + 1;
  for (size_t i = 0; i < ne; i++) cap += strlen(ed[i]->text);
  char *out = malloc(cap);
  size_t n = 0, at = 0;
  for (size_t i = 0; i < ne; i++) {
    memcpy(out + n, text + at, ed[i]->loc.start - at);
    n += ed[i]->loc.start - at;
    n += (size_t)sprintf(out + n, "%s", ed[i]->text);
    at = ed[i]->loc.end;
  }
  strcpy(out + n, text + at);
  return out;
}

static void test_seed_diagnostic(void **state) {
  run r;
  check_text(&r, seed_before, 1, NULL, 0);
  assert_int_equal(r.d.n, 1);
  const fs_diag *g = expect(&r, 0, "R36", 9, 40,
    "The optimizer has references to the model's meta-device parameters. Materializing them is is currently not supported unless you to set up the model and optimizer(s) separately. Create and set up the model first through `model = fabric.setup_module(model)`. Then create the optimizer and set it up: `optimizer = fabric.setup_optimizers(optimizer)`.");
  assert_int_equal(g->severity, FS_SEV_ERROR);
  assert_int_equal(g->nnotes, 2);
  uint32_t l, c;
  fsA_source_position(r.src, g->notes[0].loc.start, &l, &c);
  assert_int_equal(l, 8); assert_int_equal(c, 13);
  assert_string_equal(g->notes[0].message, "`optimizer` was created over `model.parameters()` while they were on the meta device");
  fsA_source_position(r.src, g->notes[1].loc.start, &l, &c);
  assert_int_equal(l, 6); assert_int_equal(c, 6);
  assert_string_equal(g->notes[1].message,
    "parameters are on the meta device because `model` was created under `fabric.init_module(empty_init=True)` with strategy \"fsdp\"");
  assert_string_equal(g->help, "set up the model first, then create the optimizer:\n"
                               "    model = fabric.setup_module(model)\n"
                               "    optimizer = fabric.setup_optimizers(Adam(model.parameters()))");
  /* the fix-it: apply the edits and check again */
  assert_int_equal(g->nedits, 2);
  char *fixed = apply_fixes(&r, seed_before);
  assert_non_null(strstr(fixed,
    "    model = Linear(8, 8)            # meta\n"
    "model = fabric.setup_module(model)\n"
    "optimizer = Adam(model.parameters())\n"
    "optimizer = fabric.setup_optimizers(optimizer)  # the joint setup\n"));
  run r2;
  check_text(&r2, fixed, 1, NULL, 0);
  assert_int_equal(r2.d.n, 0);
  run_free(&r2);
  free(fixed);
  run_free(&r);
  (void)state;
}

/* Pre-flight: a machine without what Fabric(...) declares is checked for
 * the declared one, with one note at the first Fabric(...); without
 * pre-flight (--here, a run) the same machine gives R7. */
static void test_preflight(void **state) {
  fsC_options o;
  fsC_options_init(&o);
  o.machine.cuda_gpus = 1;
  o.preflight = 1;
  run r;
  check_with(&r, "a = Fabric(accelerator=\"cuda\", devices=4)\n"
                 "b = Fabric(strategy=\"deepspeed\", accelerator=\"cuda\", devices=2)\n", &o);
  assert_int_equal(r.d.n, 1);
  const fs_diag *g = expect(&r, 0, "preflight", 1, 5,
                            "checked for 4 CUDA GPUs as the script declares; this machine has only 1 "
                            "(--here checks for this machine)");
  assert_int_equal(g->severity, FS_SEV_NOTE);
  run_free(&r);
  o.machine.cuda_gpus = 0;
  check_with(&r, "b = Fabric(strategy=\"deepspeed\", devices=2, precision=\"transformer-engine\")\n", &o);
  assert_int_equal(r.d.n, 2);
  expect(&r, 0, "preflight", 1, 5,
         "checked for 2 CUDA GPUs, DeepSpeed and Transformer Engine as the script declares; this machine "
         "has no CUDA GPU, no DeepSpeed and no Transformer Engine (--here checks for this machine)");
  expect(&r, 1, "R11", 1, 55, "`precision='transformer-engine')` is not supported in DeepSpeed.");
  run_free(&r);
  check_with(&r, "c = Fabric(accelerator=\"cpu\", devices=2)\nd = Fabric(accelerator=\"auto\", devices=3)\n", &o);
  assert_int_equal(r.d.n, 0); /* nothing declared that this machine lacks */
  run_free(&r);
  o.preflight = 0;
  check_with(&r, "a = Fabric(accelerator=\"cuda\", devices=4)\n", &o);
  assert_int_equal(r.d.n, 1);
  expect(&r, 0, "R7", 1, 24, "`CUDAAccelerator` can not run on your system");
  run_free(&r);
  (void)state;
}

/* R16 and R42 have mechanical fixes too; the fixed script checks clean. */
static void test_more_fixes(void **state) {
  static const char text[] =
    "fabric = Fabric(accelerator=\"cpu\", strategy=\"ddp\", devices=2, precision=\"bf16-mixed\")  # two ranks\n"
    "model = fabric.setup(Linear(4, 4))\n"
    "loader = fabric.setup_dataloaders(DataLoader(RandomDataset(8, 4)))\n"
    "loss = model(1).sum()\n"
    "loss.backward()\n";
  run r;
  check_text(&r, text, 0, NULL, 0);
  assert_int_equal(r.d.n, 2);
  /* a missing launch() is one error, at the first call; the others are its notes */
  const fs_diag *g = expect(&r, 0, "R16", 2, 9, "To use Fabric with more than one device");
  assert_int_equal(g->nnotes, 1);
  assert_string_equal(g->notes[0].message, "this call needs `launch()` too");
  expect(&r, 1, "R42", 5, 1, "The current strategy and precision selection requires");
  assert_int_equal(r.d.items[0].nedits, 1); /* one launch() is enough */
  char *fixed = apply_fixes(&r, text);
  assert_non_null(strstr(fixed, "# two ranks\nfabric.launch()\nmodel = "));
  assert_non_null(strstr(fixed, "\nfabric.backward(loss)\n"));
  run r2;
  check_text(&r2, fixed, 0, NULL, 0);
  assert_int_equal(r2.d.n, 0);
  run_free(&r2);
  free(fixed);
  run_free(&r);
  (void)state;
}

/* What one diagnostic must be: rule, position, the start of its message,
 * and (if given) its first note in full and how many notes it has. */
typedef struct want {
  const char *rule;
  uint32_t line, col;
  const char *msg, *note;
  bool warning;
  size_t nnotes;
} want;

/* A script, the target machine's GPUs, options, and every diagnostic the
 * check must give, in source order (rule NULL ends the list). */
typedef struct check_case {
  const char *why, *text;
  int gpus;
  const char *args[2];
  want w[5];
} check_case;

static void run_cases(const check_case *cs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const check_case *k = &cs[i];
    size_t nargs = 0, nw = 0;
    while (nargs < 2 && k->args[nargs]) nargs++;
    run r;
    check_text(&r, k->text, k->gpus, k->args, nargs);
    while (nw < 5 && k->w[nw].rule) nw++;
    if (r.d.n != nw) print_error("case \"%s\": %zu diagnostics, %zu expected\n", k->why, r.d.n, nw);
    assert_int_equal(r.d.n, nw);
    for (size_t j = 0; j < nw; j++) {
      const want *w = &k->w[j];
      const fs_diag *g = expect(&r, j, w->rule, w->line, w->col, w->msg);
      assert_int_equal(g->severity, w->warning ? FS_SEV_WARNING : FS_SEV_ERROR);
      if (w->note) {
        assert_true(g->nnotes > 0);
        assert_string_equal(g->notes[0].message, w->note);
      }
      if (w->nnotes) assert_int_equal(g->nnotes, w->nnotes);
    }
    run_free(&r);
  }
}

#define FSDP_META "fabric = Fabric(strategy=\"fsdp\", accelerator=\"cuda\", devices=1)\nfabric.launch()\n" \
                  "with fabric.init_module(empty_init=True):\n    model = Linear(8, 8)\n"
#define CPU_FABRIC "fabric = Fabric(accelerator=\"cpu\")\n"
#define TWICE_IF_PARAM CPU_FABRIC "model = Linear(4, 2)\nif param(\"twice\", False):\n" \
                       "    model = fabric.setup(model)\nmodel = fabric.setup(model)\n"
#define R36_MSG "The optimizer has references to the model's meta-device parameters."

static const check_case seed_near_misses[] = {
  {"no empty_init: parameters are real under FSDP",
   "fabric = Fabric(strategy=\"fsdp\", accelerator=\"cuda\", devices=1)\nfabric.launch()\n"
   "with fabric.init_module():\n    model = Linear(8, 8)\n"
   "optimizer = Adam(model.parameters())\nmodel, optimizer = fabric.setup(model, optimizer)\n", 1},
  {"empty_init=True under DDP is not meta",
   "fabric = Fabric(strategy=\"ddp\", accelerator=\"cuda\", devices=1)\nfabric.launch()\n"
   "with fabric.init_module(empty_init=True):\n    model = Linear(8, 8)\n"
   "optimizer = Adam(model.parameters())\nmodel, optimizer = fabric.setup(model, optimizer)\n", 1},
  {"the documented order",
   FSDP_META "model = fabric.setup_module(model)\noptimizer = fabric.setup_optimizers(Adam(model.parameters()))\n", 1},
  {"materializing makes new parameters: an optimizer made before keeps the meta ones",
   FSDP_META "optimizer = Adam(model.parameters())\nmodel = fabric.setup_module(model)\n"
   "optimizer = fabric.setup_optimizers(optimizer)\n", 1,
   {0}, {{"R37", 7, 37, R36_MSG " Materializing them is is currently not supported. Create",
          "`optimizer` was created over `model.parameters()` while they were on the meta device"}}},
};

static const check_case paths[] = {
  {"one branch sets up: the second setup fails on that path, with a note (two ranks: rank 0 takes it)",
   "fabric = Fabric(accelerator=\"cpu\", strategy=\"ddp\", devices=2)\nfabric.launch()\n"
   "model = Linear(4, 2)\nif fabric.global_rank == 0:\n    model = fabric.setup(model)\n"
   "model = fabric.setup(model)\n", 0,
   {0}, {{"R22", 6, 22, "A model should be passed only once to the `setup` method.",
          "on the paths where this condition is true"}}},
  {"a known condition takes one branch only", TWICE_IF_PARAM, 0},
  {"... which -D decides", TWICE_IF_PARAM, 0, {"-Dtwice=true"},
   {{"R22", 5, 22, "A model should be passed only once"}}},
  {"setting up inside a loop: the second iteration sees the set-up model",
   CPU_FABRIC "opt = SGD(Linear(2, 2).parameters(), lr=0.1)\n"
   "for epoch in range(3):\n    opt = fabric.setup_optimizers(opt)\n", 0,
   {0}, {{"R27", 4, 35, "An optimizer should be passed only once to the `setup_optimizers` method."}}},
  {"each element of a literal list gets its own round (m1's second: the raw model again, which a run cannot)",
   CPU_FABRIC "m1 = Linear(2, 2)\nm2 = fabric.setup(Linear(2, 2))\n"
   "for m in [m1, m1, m2]:\n    fabric.setup(m)\n", 0,
   {0}, {{"unsupported", 5, 18, "setting up the raw model again is not supported at run time yet"},
         {"R22", 5, 18, "A model should be passed only once to the `setup` method."}}},
  {"a def is analysed at its call: launch(train) runs train launched",
   "def train(fabric):\n    model = fabric.setup(Linear(2, 2))\n"
   "if __name__ == \"__main__\":\n"
   "    fabric = Fabric(accelerator=\"cpu\", strategy=\"ddp_spawn\", devices=2)\n"
   "    fabric.launch(train)\n", 0},
  {"a def nothing calls: its text is checked, not Fabric's state rules",
   "fabric = Fabric(accelerator=\"cpu\", strategy=\"ddp\", devices=2)\n"
   "def helper(m):\n    return fabric.setup(m) + undefined_name\n", 0,
   {0}, {{"name", 3, 30, "name 'undefined_name' is not defined"}}},
  {"a def called without launch",
   "def train(fabric):\n    model = fabric.setup(Linear(2, 2))\n"
   "fabric = Fabric(accelerator=\"cpu\", strategy=\"ddp_spawn\", devices=2)\n"
   "train(fabric)\n", 0,
   {0}, {{"R16", 2, 13, "To use Fabric with more than one device"}}},
  {"the path's note once, though the model and its optimizer both came that way",
   "fabric = Fabric(strategy=\"fsdp\", accelerator=\"cuda\", devices=2)\nfabric.launch()\n"
   "if fabric.global_rank == 0:\n    with fabric.init_module(empty_init=True):\n        model = Linear(8, 8)\n"
   "else:\n    model = Linear(8, 8)\noptimizer = Adam(model.parameters())\n"
   "model, optimizer = fabric.setup(model, optimizer)\n", 2,
   {0}, {{"R36", 9, 40, R36_MSG, "on the paths where this condition is true", false, 3}}},
  {"a path that returns early contributes nothing after the `if`",
   "def prepare(fabric, model, again):\n"
   "    if again:\n        model = fabric.setup(model)\n        return model\n"
   "    model = fabric.setup(model)\n    return model\n"
   CPU_FABRIC "m = prepare(fabric, Linear(2, 2), fabric.global_rank == 0)\n"
   "fabric.backward(m(1).sum(), model=m)\n", 0},
};

static const check_case configuration[] = {
  {"a CLI value that conflicts with the script's", "fabric = Fabric(strategy=\"ddp\")\n", 0,
   {"--strategy=fsdp"},
   {{"R68", 1, 10, "Your code has `Fabric(strategy='ddp', ...)` but it conflicts with the value `--strategy=fsdp` set through the CLI.  Remove it"}}},
  {"cuda on a machine without GPUs", "fabric = Fabric(strategy=\"fsdp\", accelerator=\"cuda\")\n", 0,
   {0}, {{"R7", 1, 46, "`CUDAAccelerator` can not run on your system"}}},
  {"param() feeds the configuration",
   "fabric = Fabric(accelerator=\"cpu\", strategy=param(\"strategy\", \"auto\"))\n", 0,
   {"-Dstrategy=dp"},
   {{"W7", 1, 45, "'dp' is not supported on CPUs, hence setting `strategy='ddp'`.", NULL, true}}},
  {"a DDPStrategy object's start method decides whether launch() needs a function",
   "fabric = Fabric(accelerator=\"cpu\", devices=2, strategy=DDPStrategy(start_method=\"spawn\"))\n"
   "fabric.launch()\n", 0,
   {0}, {{"R17", 2, 1, "To spawn processes with the `DDPStrategy` strategy"}}},
};

static const check_case other_checks[] = {
  {"shapes, keywords, names, literal types and attributes, all in one run",
   "model MLP(hidden=256, classes=10):\n    Flatten()\n    fc1 = Linear(28 * 28, hidden)\n"
   "    ReLU()\n    fc2 = Linear(128, classes)\n"
   "net = MLP()\nopt = SGD(net.parameters(), lr=0.1, momentm=0.9)\n"
   "x = missing + 1\nLinear(\"a\", 3)\nnet.frobnicate()\n", 0,
   {0}, {{"shape", 5, 11, "`Linear` expects 128 input features, but the layer before it gives 256",
          "`Linear(28 * 28, hidden)` gives 256 features"},
         {"call", 7, 37, "SGD() got an unexpected keyword argument 'momentm'"},
         {"name", 8, 5, "name 'missing' is not defined"},
         {"type", 9, 8, "Linear() argument 'in_features' must be int, not str"},
         {"attr", 10, 5, "'MLP' object has no attribute 'frobnicate'"}}},
  {"the sizes follow the instantiation's arguments",
   "model MLP(hidden=128):\n    Linear(784, hidden)\n    Linear(128, 10)\nnet = MLP()\n", 0},
  {"to_empty() then a forward, unless reset_parameters() comes between",
   "m = Linear(3, 3)\nm.to_empty(device=\"cpu\")\ny = m(1)\n"
   "k = Linear(3, 3)\nk.to_empty(device=\"cpu\")\nk.reset_parameters()\ny = k(1)\n", 0,
   {0}, {{"uninit", 3, 5, "the model runs on uninitialized parameters", NULL, true}}},
  {"loss.backward() of a set-up model under bf16-mixed, not of a raw one",
   "fabric = Fabric(accelerator=\"cpu\", precision=\"bf16-mixed\")\n"
   "model = fabric.setup(Linear(4, 2))\nloss = model(1).sum()\nloss.backward()\n"
   "raw = Linear(4, 2)\nraw(1).sum().backward()\n", 0,
   {0}, {{"R42", 4, 1, "The current strategy and precision selection requires you to call `fabric.backward(loss)`"}}},
  {"a meta model that is never set up cannot run",
   "with device(\"meta\"):\n    m = Linear(2, 2)\ny = m(1)\n", 0,
   {0}, {{"meta-forward", 3, 5, "the model's parameters are on the meta device"}}},
};

static const check_case dataflow[] = {
  {"aliases, containers and param groups carry the parameter references",
   FSDP_META "alias = [model]\nopt = Adam([{\"params\": alias[0].parameters()}])\n"
   "model, opt = fabric.setup(model, opt)\n", 1,
   {0}, {{"R36", 7, 34, R36_MSG}}},
};

#define CASES(name) \
  static void test_##name(void **state) { \
    run_cases(name, sizeof name / sizeof name[0]); \
    (void)state; \
  }
CASES(seed_near_misses)
CASES(paths)
CASES(configuration)
CASES(other_checks)
CASES(dataflow)

/* ---- Python scripts (issue 19): imports, classes, entry points ----------- */

/* Checks text as the Python script t.py for a machine with 4 GPUs; returns
 * the number of diagnostics (errors and warnings). */
static size_t check_py(run *r, const char *text, const char *define) {
  fsC_options o;
  fsC_options_init(&o);
  o.machine.cuda_gpus = 4;
  const char *defs[1] = {define};
  o.defines = defs;
  o.ndefines = define ? 1 : 0;
  r->src = fsA_source_from_buffer("t.py", text, strlen(text));
  fsD_init(&r->d);
  int nerr = 0;
  r->ast = fsP_parse(r->src, &r->d, &nerr);
  assert_int_equal(nerr, 0);
  fsC_check(r->src, r->ast, &o, &r->d);
  fsD_sort(&r->d);
  return r->d.n;
}

static void test_python(void **state) {
  (void)state;
  run r;
  /* Python's own names, foreign imports and torch names not modelled: unknown */
  assert_int_equal(check_py(&r,
    "import numpy as np, argparse\nimport torch\nfrom torch import nn\nfrom .local import thing\n"
    "if __name__ == \"__main__\":\n"
    "    m = nn.MultiheadAttention(8, 2)\n"
    "    c = torch.compile(m, mode=np.zeros(3))\n"
    "    if not isinstance(c, nn.Module) or len(sys.argv) > 3:\n"
    "        raise ValueError(open(thing).read())\n", NULL), 1);
  expect(&r, 0, "name", 8, 44, "name 'sys' is not defined"); /* a misspelt or missing name still is */
  run_free(&r);
  /* torch's and Lightning's real members exist; a member neither has is an error */
  assert_int_equal(check_py(&r,
    "import lightning as L\nimport torch.nn as nn\n"
    "fabric = L.Fabric(accelerator=\"cuda\", devices=1)\n"
    "with fabric.rank_zero_first():\n"
    "    layer = nn.Linear(4, 4, device=\"meta\")\n"
    "w = layer.weight\n"
    "fabric.setupp(layer)\n", NULL), 1);
  expect(&r, 0, "attr", 7, 8, "'Fabric' object has no attribute 'setupp'");
  run_free(&r);
  /* the seed inside main(fabric) of a class-defined model, launched; the
   * class is defined after main, as scripts do */
  static const char seed[] =
    "import torch\nfrom torch import nn\nfrom lightning.fabric import Fabric\n"
    "from lightning.fabric.strategies import FSDPStrategy\n"
    "def main(fabric, lr):\n"
    "    with fabric.init_module(empty_init=True):\n"
    "        model = Net(8)\n"
    "    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)\n"
    "    model, optimizer = fabric.setup(model, optimizer)\n"
    "class Net(nn.Module):\n"
    "    def __init__(self, dim):\n"
    "        super().__init__()\n"
    "        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])\n"
    "    def forward(self, x):\n"
    "        return self.blocks[0](x)\n"
    "if __name__ == \"__main__\":\n"
    "    fabric = Fabric(devices=4, strategy=FSDPStrategy(auto_wrap_policy={nn.Linear}), precision=\"bf16-mixed\")\n"
    "    fabric.launch(main, 3e-4)\n";
  check_py(&r, seed, NULL);
  const fs_diag *g = NULL;
  for (size_t i = 0; i < r.d.n && !g; i++) if (!strcmp(r.d.items[i].rule, "R36")) g = expect(&r, i, "R36", 9, 44, R36_MSG);
  assert_non_null(g);
  assert_int_equal(g->nnotes, 2);
  run_free(&r);
  /* -D reaches an argparse option as args.<name> */
  assert_int_equal(check_py(&r,
    "import argparse\nfrom lightning.fabric import Fabric\n"
    "args = argparse.ArgumentParser().parse_args()\n"
    "fabric = Fabric(accelerator=\"cpu\", strategy=args.strategy)\n", "strategy=fsdp"), 1);
  expect(&r, 0, "R10", 4, 45, "You selected the FSDP strategy");
  run_free(&r);
  /* @torch.no_grad() returns the function: its body is checked where called;
   * under a decorator not modelled the def is unknown, its body still checked */
  assert_int_equal(check_py(&r,
    "import functools, torch\nfrom lightning.fabric import Fabric\n"
    "@torch.no_grad()\ndef validate(fabric, model):\n    return fabric.setup(model)\n"
    "@functools.cache\ndef other(x):\n    return y\n"
    "fabric = Fabric(accelerator=\"cpu\")\n"
    "validate(fabric, fabric.setup(torch.nn.Linear(2, 2)))\n", NULL), 2);
  expect(&r, 0, "R22", 5, 25, "A model should be passed only once");
  expect(&r, 1, "name", 8, 12, "name 'y' is not defined");
  run_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_python),
    cmocka_unit_test(test_seed_diagnostic),
    cmocka_unit_test(test_seed_near_misses),
    cmocka_unit_test(test_more_fixes),
    cmocka_unit_test(test_paths),
    cmocka_unit_test(test_configuration),
    cmocka_unit_test(test_preflight),
    cmocka_unit_test(test_other_checks),
    cmocka_unit_test(test_dataflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
