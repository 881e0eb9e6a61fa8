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

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from net_twin import Net, evaluate, run_net_port, train_pass  # noqa: E402
from ports_common import compare, fashion_mnist, numbers_after, setup_torch  # noqa: E402

fs, tmp = sys.argv[1], sys.argv[2]
CHANNELS, HIDDEN, BATCH, TRAIN, TEST, EPOCHS, LR, GAMMA = 4, 16, 64, 640, 256, 2, 1.0, 0.7

out = run_net_port(fs, "image_classifier.fab", tmp, epochs=EPOCHS, channels=CHANNELS, hidden=HIDDEN,
                   batch_size=BATCH, train_size=TRAIN, test_size=TEST, lr=LR, gamma=GAMMA)

setup_torch()
model = Net(CHANNELS, HIDDEN)
model.load_state_dict(torch.load(f"{tmp}/init.ckpt")["model"])  # strict: torch's names
optimizer = torch.optim.Adadelta(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=GAMMA)
xs, ys = fashion_mnist(True, TRAIN)
tx, ty = fashion_mnist(False, TEST)
losses, test_losses = [], []
for epoch in range(EPOCHS):
    losses += train_pass(model, optimizer, [(xs[b:b + BATCH], ys[b:b + BATCH]) for b in range(0, TRAIN, BATCH)])
    scheduler.step()
    total, _, _ = evaluate(model, [(tx[b:b + BATCH], ty[b:b + BATCH]) for b in range(0, TEST, BATCH)])
    test_losses.append(total / TEST)

compare("image classifier: training losses", numbers_after("Loss:", out), losses, rtol=1e-4)
compare("image classifier: test losses", numbers_after("Average loss:", out), test_losses, rtol=0, atol=2e-4)
