# mode: check
# warnings: exact
"""Idioms of litgpt (Lightning-AI/litgpt: api.py, utils.py, generate/*.py)
that are valid Python and must check clean: Fabric.print with print's own
keywords, a fabric known only as one of two (set up on one path or the
other), Fabric's and Module's private attributes, and an `assert False` in
a method no path calls (pickle's hook).  The same assert in a def that runs
is an error."""
import sys

import lightning as L
from litgpt.model import GPT


class OutOfBand:
    def __reduce_ex__(self, protocol_version):
        assert False, "this should be handled with out of band"


def distribute(strategy, config):
    if strategy != "tensor_parallel":
        fabric = L.Fabric(accelerator="cpu", devices=1)
    else:
        fabric = L.Fabric(accelerator="cpu", devices=2, strategy="ddp")
    fabric.print("Loading model", file=sys.stderr, flush=True)
    model = GPT(config)
    model = fabric.setup_module(model)
    print(model.max_seq_length)
    model.set_kv_cache(batch_size=1)
    plain = fabric._precision.convert_module(model._forward_module)
    return plain


def always_fails():
    assert False, "reached"  # error: AssertionError: reached


distribute(sys.argv[1], None)
always_fails()
