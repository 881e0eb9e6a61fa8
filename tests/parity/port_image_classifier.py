"""The image-classifier port against its PyTorch twin (torch 1.13).

Usage: port_image_classifier.py FABRICSCRIPT TMPDIR.

examples/ports/image_classifier.fab runs 2 epochs of 10 batches of 64
(train_size=640, a narrow Net: channels=4, hidden=16) with dropout off
(dropout masks are not torch's random draws), saves its initial weights
with fabric.save and prints every step's loss (log_interval=1) and each
epoch's test loss.  The twin is the same Net in torch.nn loading those
weights, Adadelta(lr=1.0) and StepLR(step_size=1, gamma=0.7) stepped per
epoch (the example's optimizer and hyper-parameters), the
same batches: the loaders do not shuffle, so both sides read items 0..639
of the training set and 0..255 of the test set in order.  All 20 losses
must agree within 1e-4 relative (they print 6 decimals; this build measured
1.4e-6, the sanitizer build, whose float code differs, up to 1.7e-5 on the
k-fold twin), the two test losses
within 2e-4 (4 decimals).  (Torch's own float32 and float64 runs of this
twin differ by up to 2e-6 over the 20 steps: Adadelta at lr 1.0 does not
amplify rounding the way RMSprop's first steps at lr 1e-3 do, where they
differ by 5.7e-3 at step 16.)"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ports_common import compare, fashion_mnist, numbers_after, run_port, setup_torch  # noqa: E402

fs, tmp = sys.argv[1], sys.argv[2]
CHANNELS, HIDDEN, BATCH, TRAIN, TEST, EPOCHS, LR, GAMMA = 4, 16, 64, 640, 256, 2, 1.0, 0.7
MEAN, STD = 0.2860, 0.3530


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


out = run_port(fs, "image_classifier.fab", "-D", f"epochs={EPOCHS}", "-D", f"channels={CHANNELS}",
               "-D", f"hidden={HIDDEN}", "-D", f"batch_size={BATCH}", "-D", f"train_size={TRAIN}",
               "-D", f"test_size={TEST}", "-D", "dropout1=0.0", "-D", "dropout2=0.0",
               "-D", "log_interval=1", "-D", f"lr={LR}", "-D", f"gamma={GAMMA}",
               "-D", f"save_init={tmp}/init.ckpt")

setup_torch()
model = Net(CHANNELS, HIDDEN)
model.load_state_dict(torch.load(f"{tmp}/init.ckpt")["model"])  # strict: torch's names
optimizer = torch.optim.Adadelta(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=GAMMA)
xs, ys = fashion_mnist(True, TRAIN)
tx, ty = fashion_mnist(False, TEST)
losses, test_losses = [], []
for epoch in range(EPOCHS):
    model.train()
    for b in range(0, TRAIN, BATCH):
        optimizer.zero_grad()
        loss = F.nll_loss(model((xs[b:b + BATCH] - MEAN) / STD), ys[b:b + BATCH])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    scheduler.step()
    model.eval()
    total = 0.0
    with torch.no_grad():
        for b in range(0, TEST, BATCH):
            total += F.nll_loss(model((tx[b:b + BATCH] - MEAN) / STD), ty[b:b + BATCH], reduction="sum").item()
    test_losses.append(total / TEST)

compare("image classifier: training losses", numbers_after("Loss:", out), losses, rtol=1e-4)
compare("image classifier: test losses", numbers_after("Average loss:", out), test_losses, rtol=0, atol=2e-4)
