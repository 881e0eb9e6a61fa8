# mode: check
# warnings: exact
# args: --gpus=2
# FSDP's own precision plugin, and AMP's plugin under DDP.
from lightning.fabric import Fabric
from lightning.fabric.plugins import FSDPPrecision, MixedPrecision

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp", plugins=FSDPPrecision("bf16-mixed"))
ddp = Fabric(accelerator="cuda", devices=2, strategy="ddp", plugins=[MixedPrecision("bf16-mixed", "cuda")])
