# mode: check
# args: --gpus=2
# ModelParallelStrategy's getter refuses too, through fabric.strategy.
from lightning.fabric import Fabric
from lightning.fabric.strategies import ModelParallelStrategy

def parallelize(model, device_mesh):
    return model

fabric = Fabric(accelerator="cuda", devices=2, strategy=ModelParallelStrategy(parallelize_fn=parallelize))
io = fabric.strategy.checkpoint_io  # error: The `ModelParallelStrategy` does not use the `CheckpointIO` plugin interface.
