/* pynames.h -- what Python's names mean to fabricscript: the names Python
 * itself defines (builtins.__dict__ and a module's own dunders), and the
 * torch/lightning namespaces mapped onto signatures.h's rows.
 * Invariant: a dotted name resolves to a row only where torch or Lightning
 * export that very class or function under that name; every other name of
 * those packages is "known namespace, not modelled" and never an error.
 * The checker (interp/check/check.c) reads this now; the evaluator can bind
 * the same imports from the same table later, which is why it lives in lang/. */
#ifndef FS_PYNAMES_H
#define FS_PYNAMES_H

/* 1 when Python defines name in every module without an import
 * (`len`, `ValueError`, `__name__`, `super` ...). */
int fsSig_python_builtin(const char *name);

typedef enum fsSig_ns {
  FSSIG_NS_FOREIGN, /* not torch or lightning: numpy, argparse, a local module */
  FSSIG_NS_MEMBER,  /* inside torch/lightning, not modelled (a module or a name) */
  FSSIG_NS_ROW,     /* a signatures.h row with the real API's parameters */
  FSSIG_NS_LOOSE,   /* a signatures.h row narrower than the real API */
  FSSIG_NS_MODULE   /* an nn.Module class with no row (nn.Sequential, nn.ModuleList,
                     * nn.ModuleDict): its instances are modules, their contents unknown */
} fsSig_ns;

/* What the dotted name ("torch.nn.Linear", "lightning.fabric", "L.Fabric"
 * after alias expansion) is. For FSSIG_NS_ROW and _LOOSE, *row is the row's name
 * ("Linear"). lightning_fabric and pytorch_lightning are Lightning's
 * standalone packages and resolve as lightning.fabric and lightning.pytorch. */
fsSig_ns fsSig_resolve(const char *dotted, const char **row);

/* 1 when torch or Lightning give objects of the modelled type ("Tensor",
 * "Module", "Optimizer", "DataLoader", "Dataset", "Fabric") this member,
 * whether or not signatures.h has a row for it; their private names (one
 * leading underscore) count as given. */
int fsSig_real_member(const char *type, const char *member);

/* 1 when a run can bind `import dotted`: torch's and Lightning's namespaces
 * (a name of theirs with no row fails where the run uses it), math and time,
 * and the modules that only annotate (typing, __future__). The checker
 * reports any other import in a script that will run (rule `unsupported`). */
int fsSig_run_importable(const char *dotted);

#endif
