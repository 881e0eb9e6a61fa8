/* pynames.c -- Python's own names and the torch/lightning namespaces as
 * signatures.h's rows (see pynames.h). The namespace table lists, for each
 * module that exports modelled builtins, the row names it exports: one
 * table for every alias a script may use (`nn.Linear`, `torch.nn.Linear`,
 * `from torch.nn import Linear`), since each resolves to the same dotted name. */
#include "pynames.h"

#include <string.h>

/* builtins.__dict__ of CPython 3.12 (less the rows signatures.h has), and
 * the names a module gets without an import. */
static const char *const python_builtins[] = {
  "__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
  "__debug__", "__import__", "__build_class__", "__dict__",
  "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool", "breakpoint", "bytearray",
  "bytes", "callable", "chr", "classmethod", "compile", "complex", "copyright", "credits",
  "delattr", "dict", "dir", "divmod", "enumerate", "eval", "exec", "exit", "filter", "float",
  "format", "frozenset", "getattr", "globals", "hasattr", "hash", "help", "hex", "id", "input",
  "int", "isinstance", "issubclass", "iter", "len", "license", "list", "locals", "map", "max",
  "memoryview", "min", "next", "object", "oct", "open", "ord", "pow", "print", "property",
  "quit", "range", "repr", "reversed", "round", "set", "setattr", "slice", "sorted",
  "staticmethod", "str", "sum", "super", "tuple", "type", "vars", "zip",
  "Ellipsis", "NotImplemented",
  "ArithmeticError", "AssertionError", "AttributeError", "BaseException",
  "BaseExceptionGroup", "BlockingIOError", "BrokenPipeError", "BufferError", "BytesWarning",
  "ChildProcessError", "ConnectionAbortedError", "ConnectionError", "ConnectionRefusedError",
  "ConnectionResetError", "DeprecationWarning", "EncodingWarning", "EnvironmentError",
  "EOFError", "Exception", "ExceptionGroup", "FileExistsError", "FileNotFoundError",
  "FloatingPointError", "FutureWarning", "GeneratorExit", "ImportError", "ImportWarning",
  "IndentationError", "IndexError", "InterruptedError", "IOError", "IsADirectoryError",
  "KeyboardInterrupt", "KeyError", "LookupError", "MemoryError", "ModuleNotFoundError",
  "NameError", "NotADirectoryError", "NotImplementedError", "OSError", "OverflowError",
  "PendingDeprecationWarning", "PermissionError", "ProcessLookupError", "RecursionError",
  "ReferenceError", "ResourceWarning", "RuntimeError", "RuntimeWarning", "StopAsyncIteration",
  "StopIteration", "SyntaxError", "SyntaxWarning", "SystemError", "SystemExit", "TabError",
  "TimeoutError", "TypeError", "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError",
  "UnicodeError", "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError",
  "Warning", "ZeroDivisionError",
};

int fsSig_python_builtin(const char *name) {
  for (size_t i = 0; i < sizeof python_builtins / sizeof *python_builtins; i++)
    if (!strcmp(python_builtins[i], name)) return 1;
  return 0;
}

/* Each module and the rows it exports under their own names (space-separated). */
static const struct { const char *module, *rows; } namespaces[] = {
  {"torch", "device no_grad float32 bfloat16 int64 long tensor zeros ones empty full arange "
            "linspace eye rand randn randint zeros_like ones_like empty_like full_like rand_like "
            "randn_like cat stack where exp log sqrt tanh sigmoid maximum minimum clamp softmax "
            "log_softmax matmul bmm"},
  {"torch.nn", "Linear Embedding LayerNorm ReLU GELU Tanh Sigmoid SiLU Dropout Flatten"},
  {"torch.nn.functional", "cross_entropy mse_loss softmax log_softmax sigmoid tanh"},
  {"torch.optim", "SGD Adam AdamW RMSprop Adagrad"},
  {"torch.optim.lr_scheduler", "StepLR MultiStepLR ExponentialLR CosineAnnealingLR "
                               "CosineAnnealingWarmRestarts LinearLR ConstantLR LambdaLR "
                               "OneCycleLR SequentialLR ReduceLROnPlateau"},
  {"torch.utils.data", "DataLoader"},
  {"torch.utils.data.dataloader", "DataLoader"},
  {"torchvision.datasets", "MNIST FashionMNIST"},
  {"lightning", "Fabric"},
  {"lightning.fabric", "Fabric"},
  {"lightning.fabric.fabric", "Fabric"},
  {"lightning.fabric.strategies", "FSDPStrategy DDPStrategy DeepSpeedStrategy"},
  {"lightning.fabric.strategies.fsdp", "FSDPStrategy"},
  {"lightning.fabric.strategies.ddp", "DDPStrategy"},
  {"lightning.fabric.strategies.deepspeed", "DeepSpeedStrategy"},
};

/* Whether word is one of the space-separated words of list. */
static int has_word(const char *list, const char *word, size_t n) {
  for (const char *p = list; *p;) {
    size_t k = strcspn(p, " ");
    if (k == n && !memcmp(p, word, n)) return 1;
    p += k;
    while (*p == ' ') p++;
  }
  return 0;
}

/* The package a top-level name stands for, or NULL when it is foreign. */
static const char *package_of(const char *dotted, size_t *skip) {
  static const struct { const char *name, *as; } packages[] = {
    {"torch", "torch"}, {"torchvision", "torchvision"}, {"lightning", "lightning"},
    {"lightning_fabric", "lightning.fabric"}, {"pytorch_lightning", "lightning.pytorch"},
  };
  size_t n = strcspn(dotted, ".");
  for (size_t i = 0; i < sizeof packages / sizeof *packages; i++)
    if (strlen(packages[i].name) == n && !memcmp(packages[i].name, dotted, n)) {
      *skip = n;
      return packages[i].as;
    }
  return NULL;
}

fsSig_ns fsSig_resolve(const char *dotted, const char **row) {
  size_t skip;
  const char *pkg = package_of(dotted, &skip);
  if (!pkg) return FSSIG_NS_FOREIGN;
  const char *rest = dotted + skip; /* "" or ".nn.Linear" */
  const char *last = strrchr(rest, '.');
  if (!last) return FSSIG_NS_MEMBER;
  size_t plen = strlen(pkg), mlen = (size_t)(last - rest);
  for (size_t i = 0; i < sizeof namespaces / sizeof *namespaces; i++) {
    const char *m = namespaces[i].module;
    if (strncmp(m, pkg, plen) || strncmp(m + plen, rest, mlen) || m[plen + mlen]) continue;
    if (has_word(namespaces[i].rows, last + 1, strlen(last + 1))) {
      *row = last + 1;
      return FSSIG_NS_ROW;
    }
  }
  return FSSIG_NS_MEMBER;
}
