"""net_twin -- the Net of examples/ports/image_classifier.fab and kfold_cv.fab in torch.nn.

Both ports train the same small CNN on Fashion-MNIST; their PyTorch twins
(tests/parity/port_image_classifier.py, port_kfold_cv.py) build it here, run
the port with the settings that make the two sides comparable (run_net_port)
and train and evaluate it with the same steps.  Invariant: the class, the
normalization and the steps are the port's (the .fab files hold their other
half); what differs between the twins -- data order, optimizer, schedule --
stays in each twin."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from ports_common import run_port  # the twins put tests/parity/ on sys.path

MEAN, STD = 0.2860, 0.3530  # the ports' normalization: Fashion-MNIST's pixel mean and deviation


class Net(nn.Module):
    def __init__(self, channels, hidden):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, 1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, 1)
        self.dropout1 = nn.Dropout(0.0)
        self.dropout2 = nn.Dropout(0.0)
        self.fc1 = nn.Linear(2 * channels * 12 * 12, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = torch.flatten(self.dropout1(F.max_pool2d(x, 2)), 1)
        x = self.fc2(self.dropout2(F.relu(self.fc1(x))))
        return F.log_softmax(x, dim=1)


def run_net_port(fs, port, tmp, **defines):
    """run_port with dropout off (its masks are not torch's random draws), every step's loss
    printed and the initial weights saved with fabric.save to TMP/init.ckpt."""
    return run_port(fs, port, **defines, dropout1=0.0, dropout2=0.0, log_interval=1,
                    save_init=f"{tmp}/init.ckpt")


def train_pass(model, optimizer, batches):
    """One training pass over (data, target) batches: each step's loss."""
    model.train()
    losses = []
    for data, target in batches:
        optimizer.zero_grad()
        loss = F.nll_loss(model((data - MEAN) / STD), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def evaluate(model, batches):
    """The summed loss, the correct predictions and the items seen over (data, target) batches."""
    model.eval()
    total, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for data, target in batches:
            output = model((data - MEAN) / STD)
            total += F.nll_loss(output, target, reduction="sum").item()
            correct += (output.argmax(1) == target).sum().item()
            seen += len(target)
    return total, correct, seen


if __name__ == "__main__":
    sys.exit("net_twin.py is a module for tests/parity/port_image_classifier.py and port_kfold_cv.py")
