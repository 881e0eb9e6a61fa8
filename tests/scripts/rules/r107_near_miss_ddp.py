# mode: check
# warnings: exact
# args: --gpus=2
# DDP's strategy has a CheckpointIO (TorchCheckpointIO).
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
io = fabric.strategy.checkpoint_io
