# mode: check
# warnings: exact
# args: --gpus=2
# A .py parallelize_fn may shard with torch's APIs: each set-up model counts as
# distributed: one checkpoint per model.
import lightning as L
import torch.nn as nn
from lightning.fabric.strategies import ModelParallelStrategy
from torch.distributed._composable.fsdp.fully_shard import fully_shard


def parallelize(model, device_mesh):
    fully_shard(model, mesh=device_mesh["data_parallel"])
    return model


def main():
    fabric = L.Fabric(accelerator="cuda", devices=2, strategy=ModelParallelStrategy(parallelize))
    fabric.launch()
    encoder = fabric.setup(nn.Linear(8, 8))
    decoder = fabric.setup(nn.Linear(8, 8))
    fabric.save("encoder.ckpt", {"encoder": encoder})
    fabric.save("decoder.ckpt", {"decoder": decoder})


if __name__ == "__main__":
    main()
