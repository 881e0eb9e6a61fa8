# mode: check
"""Tensor parallelism with ModelParallelStrategy and a parallelize function,
in the shape of Lightning's examples/fabric/tensor_parallel."""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.fabric.strategies import ModelParallelStrategy
from torch.distributed._composable.fsdp.fully_shard import fully_shard
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.utils.data import DataLoader


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def parallelize(model: FeedForward, device_mesh: DeviceMesh) -> FeedForward:
    tp_mesh = device_mesh["tensor_parallel"]
    dp_mesh = device_mesh["data_parallel"]
    if tp_mesh.size() > 1:
        plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel(), "w3": ColwiseParallel()}
        parallelize_module(model, tp_mesh, plan)
    if dp_mesh.size() > 1:
        fully_shard(model.w1, mesh=dp_mesh)
        fully_shard(model, mesh=dp_mesh)
    return model


class RandomTokenDataset(torch.utils.data.Dataset):
    def __init__(self, size: int, dim: int):
        self.data = torch.randn(size, dim)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]


def train():
    strategy = ModelParallelStrategy(parallelize_fn=parallelize, data_parallel_size=1, tensor_parallel_size=2)
    fabric = L.Fabric(accelerator="cuda", devices=2, strategy=strategy)
    fabric.launch()

    with fabric.init_module(empty_init=True):
        model = FeedForward(8192, 8192)
    model = fabric.setup(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=True)
    optimizer = fabric.setup_optimizers(optimizer)

    dataset = RandomTokenDataset(size=64, dim=8192)
    dataloader = DataLoader(dataset, batch_size=8)
    dataloader = fabric.setup_dataloaders(dataloader)

    for i, batch in enumerate(dataloader):
        output = model(batch)
        loss = output.sum()
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        fabric.print(f"Iteration {i} complete")
    fabric.print(f"Peak memory usage: {torch.cuda.max_memory_allocated() / 1e9:.02f} GB")


if __name__ == "__main__":
    assert torch.cuda.device_count() >= 2, "This example requires at least 2 GPUs with TP"
    train()
