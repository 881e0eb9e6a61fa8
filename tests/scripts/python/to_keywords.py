# mode: check
# warnings: exact
"""torch's keywords of Tensor.to and Module.to (non_blocking=True in a
training loop, copy=, memory_format=, dtype= alone) check clean."""
import torch
import torch.nn as nn
import lightning as L
fabric = L.Fabric(accelerator="cpu")
m = nn.Linear(4, 4)
m = m.to(torch.bfloat16)
m = m.to(dtype=torch.float32)
m = m.to("cpu", torch.float32)
m = m.to(device="cpu", dtype=torch.float32, non_blocking=True)
m = m.to(memory_format=torch.channels_last)
x = torch.randn(2, 4)
y = x.to("cpu", non_blocking=True)
z = x.to(device="cpu", copy=True)
w = x.to(torch.float16, memory_format=torch.contiguous_format)
