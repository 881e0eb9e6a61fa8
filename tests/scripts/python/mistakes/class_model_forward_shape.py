# mode: check
"""An image classifier whose class-defined model chains two literal Linears
of different sizes in forward: the checker knows the layers' sizes from
__init__'s literal arguments (as a model block's) and reports the second
layer at its call, with the first as the note."""
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(nn.Module):
    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = x.flatten(1)
        h = self.drop(self.act(self.fc1(x)))
        return self.fc2(h)  # error: `Linear` expects 64 input features, but the layer before it gives 128


fabric = L.Fabric(accelerator="cpu", devices=1)
fabric.launch()
model = Classifier()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
data = TensorDataset(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))
loader = fabric.setup_dataloaders(DataLoader(data, batch_size=16))
for x, y in loader:
    loss = F.cross_entropy(model(x), y)
    fabric.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
