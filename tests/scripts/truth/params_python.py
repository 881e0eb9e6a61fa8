# mode: check
# args: --gpus=2
"""The soundness cases in Python: parameters reach the optimizer through
extend and a comprehension, a list changed by insert has no length to index
out of, and an assert on rank 1's path only is a warning naming the rank."""
import torch
from lightning.fabric import Fabric

fabric = Fabric(strategy="fsdp", accelerator="cuda", devices=2)
fabric.launch()
with fabric.init_module(empty_init=True):
    model = torch.nn.Linear(8, 8)
    head = torch.nn.Linear(8, 2)
params = []
params.extend(model.parameters())
params.extend(p for p in head.parameters())
optimizer = torch.optim.AdamW(params, lr=1e-3)
model, optimizer = fabric.setup(model, optimizer)  # error: The optimizer has references to the model's meta-device parameters
sizes = [1, 2]
sizes.insert(0, 0)
print(sizes[2])
if fabric.global_rank == 1:  # note: only on rank 1 (of 2): this condition depends on the rank
    assert False, "rank 1 stops here"  # warning: AssertionError: rank 1 stops here
