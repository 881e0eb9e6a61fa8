# The seed's anti-pattern as a Python script: an optimizer over meta-device
# parameters passed to the joint setup under FSDP (seed_before.fab's lines).
import lightning as L
import torch
from torch import nn

fabric = L.Fabric(strategy="fsdp", accelerator="cuda", devices=1)
fabric.launch()
with fabric.init_module(empty_init=True):
    model = nn.Linear(8, 8)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
