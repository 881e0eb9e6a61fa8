# mode: check
# args: --gpus=2
# ModelParallelStrategy's setter refuses too, through fabric.strategy; a
# DDP strategy takes one (Python's to make: no report in a .py).
from lightning.fabric import Fabric
from lightning.fabric.strategies import ModelParallelStrategy

def parallelize(model, device_mesh):
    return model

fabric = Fabric(accelerator="cuda", devices=2, strategy=ModelParallelStrategy(parallelize_fn=parallelize))
fabric.strategy.checkpoint_io = None  # error: The `ModelParallelStrategy` does not support setting a `CheckpointIO` plugin.
ddp = Fabric(accelerator="cuda", devices=2, strategy="ddp")
ddp.strategy.checkpoint_io = None
