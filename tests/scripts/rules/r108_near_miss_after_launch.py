# mode: check
# warnings: exact
# args: --gpus=2
# The mesh read after launch(), through the object and through fabric.strategy.
from lightning.fabric import Fabric
from lightning.fabric.strategies import ModelParallelStrategy

def parallelize(model, device_mesh):
    return model

strategy = ModelParallelStrategy(parallelize_fn=parallelize)
fabric = Fabric(accelerator="cuda", devices=2, strategy=strategy)
fabric.launch()
mesh = strategy.device_mesh
mesh = fabric.strategy.device_mesh
