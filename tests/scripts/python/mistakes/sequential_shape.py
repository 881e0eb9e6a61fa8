# mode: check
"""A discriminator built as nn.Sequential inside a class's
__init__, with its class's own sizes given at the construction: the sizes
follow the arguments (`MLP(784, 256)`), and the third layer does not take
what the first gives. A Sequential nested as a layer of a class model keeps
its sizes: Head's forward is checked through it too."""
import lightning as L
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in: int, hidden: int, d_out: int = 1) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden),
            nn.Tanh(),
            nn.Linear(hidden // 2, d_out),  # error: `Linear` expects 128 input features, but the layer before it gives 256
        )

    def forward(self, x):
        return self.net(x)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.GELU())
        self.out = nn.Linear(16, 1)

    def forward(self, x):
        return self.out(self.body(x))  # error: `Linear` expects 16 input features, but the layer before it gives 32


fabric = L.Fabric(accelerator="cpu", devices=1)
fabric.launch()
disc = fabric.setup_module(MLP(784, 256))
head = fabric.setup_module(Head())
