# mode: check
# warnings: exact
"""ModelParallelStrategy's int mesh sizes with `devices` left to auto name
the world size, as Lightning's examples/fabric/fp8_distributed_transformer
does (4 x 1): Fabric's auto takes every GPU of a node, so the script declares
the GPUs that make that size (8 over 2 nodes: 4 per node) and launch()
passes.  With the cpu accelerator auto is one device: R98 holds."""
import lightning as L
from lightning.fabric.strategies import ModelParallelStrategy


def parallelize(model, device_mesh):
    return model


strategy = ModelParallelStrategy(data_parallel_size=4, tensor_parallel_size=2, parallelize_fn=parallelize)
fabric = L.Fabric(precision="bf16-true", strategy=strategy, num_nodes=2)  # note: checked for 4 CUDA GPUs as the script declares; this machine has
fabric.launch()

on_cpu = L.Fabric(accelerator="cpu", strategy=ModelParallelStrategy(data_parallel_size=4, tensor_parallel_size=1, parallelize_fn=parallelize))
on_cpu.launch()  # error: The sizes `data_parallel_size=4` and `tensor_parallel_size=1` multiplied should equal the world size (1).
