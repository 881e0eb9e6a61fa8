"""PyTorch CPU peer of examples/fashion_mnist.fab -D epochs=1 (model mlp)
and of examples/cnn.fab -D epochs=1 (model cnn) for scripts/bench-train: the
same MLP (784-256-256-10) or CNN (two Conv2d + BatchNorm2d + ReLU + MaxPool2d
blocks and a Linear head), Adam 1e-3, batch 128, shuffled, one epoch, then
the test accuracy; data loaded from the same IDX files. Prints
"seconds S accuracy A" for everything after `import torch`.
Usage: OPENBLAS_NUM_THREADS=N python3 mlp_torch.py N [32-true|bf16-mixed] [mlp|cnn]
(bf16-mixed: the forward under torch.autocast("cpu", bfloat16))"""
import gzip
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
mixed = len(sys.argv) > 2 and sys.argv[2] == "bf16-mixed"
cnn = len(sys.argv) > 3 and sys.argv[3] == "cnn"
torch.set_num_threads(threads)
root = "/usr/share/datasets/fashion-mnist/"
t0 = time.time()


def idx(name, offset):
    with gzip.open(root + name) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


xtr = torch.from_numpy(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32) / 255)
ytr = torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
xte = torch.from_numpy(idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32) / 255)
yte = torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
torch.manual_seed(42)
if cnn:
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 7 * 7, 10))
else:
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xtr, ytr), batch_size=128, shuffle=True)
model.train()
for x, y in loader:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
        logits = model(x)
    loss = F.cross_entropy(logits.float(), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
        correct = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item() for i in range(0, 10000, 1000))
print(f"seconds {time.time() - t0:.3f} accuracy {100 * correct / 10000:.2f}")
