"""PyTorch CPU peer of tests/bench/conv.fab for scripts/bench-conv: Conv2d
forward+backward on the same shapes (x [128, 32, 14, 14], weight
[64, 32, 3, 3], padding 1), and a CNN training step of examples/cnn.fab's
model (batch 128, random data: the kernels' time, not the loader's).
Prints "conv S cnn S": CPU seconds (time.process_time) per iteration,
after a warm-up.
Usage: OPENBLAS_NUM_THREADS=N python3 conv_torch.py N"""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
torch.manual_seed(0)
x = torch.randn(128, 32, 14, 14, requires_grad=True)
w = torch.randn(64, 32, 3, 3, requires_grad=True)
b = torch.randn(64, requires_grad=True)


def conv_step():
    F.conv2d(x, w, b, 1, 1).sum().backward()


model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(64 * 7 * 7, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.rand(128, 1, 28, 28)
labels = torch.randint(0, 10, (128,))


def cnn_step():
    loss = F.cross_entropy(model(images), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()


def per_iter(step, n):
    step()
    t = time.process_time()
    for _ in range(n):
        step()
    return (time.process_time() - t) / n


print(f"conv {per_iter(conv_step, 20):.5f} cnn {per_iter(cnn_step, 20):.5f}")
