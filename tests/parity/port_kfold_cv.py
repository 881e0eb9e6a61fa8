"""The k-fold cross-validation port against its PyTorch twin (torch 1.13).

Usage: port_kfold_cv.py FABRICSCRIPT TMPDIR.

examples/ports/kfold_cv.fab runs 2 epochs over 2 folds of the first 320
training items (batches of 32: 5 steps per fold and epoch, 20 in all) with
dropout off (dropout masks are not torch's random draws), saves every
fold's initial Net with fabric.save and prints each step's loss, each
fold's validation loss and each epoch's mean accuracy.  The twin builds the
same folds (sklearn's KFold without shuffling) and Nets in torch.nn, loads
the weights, and iterates torch's own DataLoader over SubsetRandomSampler
(fold indices, generator=torch.Generator().manual_seed(seed)) in the same
order of passes (per epoch, per fold: training, then validation), so both
sides' batches come from the same torch permutations.  All 20 losses must
agree within 1e-4 relative (6 decimals printed; measured 2.8e-6 here, 1.7e-5
in the sanitizer build, whose float code differs), the validation losses
within 2e-4 (4 decimals), the epochs' accuracies exactly.  Each fold's
optimizer is Adadelta(lr=1.0), as in the example."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Subset, SubsetRandomSampler, TensorDataset

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ports_common import compare, fashion_mnist, numbers_after, run_port, setup_torch  # noqa: E402

fs, tmp = sys.argv[1], sys.argv[2]
CHANNELS, HIDDEN, BATCH, SIZE, FOLDS, EPOCHS, LR, SEED = 4, 16, 32, 320, 2, 2, 1.0, 1
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


out = run_port(fs, "kfold_cv.fab", "-D", f"epochs={EPOCHS}", "-D", f"folds={FOLDS}", "-D", f"dataset_size={SIZE}",
               "-D", f"batch_size={BATCH}", "-D", f"channels={CHANNELS}", "-D", f"hidden={HIDDEN}",
               "-D", "dropout1=0.0", "-D", "dropout2=0.0", "-D", "log_interval=1", "-D", f"lr={LR}",
               "-D", f"seed={SEED}", "-D", f"save_init={tmp}/init.ckpt")

setup_torch()
xs, ys = fashion_mnist(True, SIZE)
dataset = Subset(TensorDataset(xs, ys), list(range(SIZE)))
fold_ids = [list(range(k * SIZE // FOLDS, (k + 1) * SIZE // FOLDS)) for k in range(FOLDS)]  # SIZE % FOLDS == 0
folds = [([i for i in range(SIZE) if i not in set(val)], val) for val in fold_ids]
generator = torch.Generator().manual_seed(SEED)
init = torch.load(f"{tmp}/init.ckpt")
models = []
for i in range(FOLDS):
    models.append(Net(CHANNELS, HIDDEN))
    models[i].load_state_dict(init[f"model{i}"])  # strict: torch's names
optimizers = [torch.optim.Adadelta(m.parameters(), lr=LR) for m in models]
losses, val_losses, accs = [], [], []
for epoch in range(EPOCHS):
    epoch_acc = 0.0
    for fold, (train_ids, val_ids) in enumerate(folds):
        train_loader = DataLoader(dataset, batch_size=BATCH, sampler=SubsetRandomSampler(train_ids, generator=generator))
        val_loader = DataLoader(dataset, batch_size=BATCH, sampler=SubsetRandomSampler(val_ids, generator=generator))
        model, optimizer = models[fold], optimizers[fold]
        model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model((data - MEAN) / STD), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        total, correct, seen = 0.0, 0, 0
        with torch.no_grad():
            for data, target in val_loader:
                output = model((data - MEAN) / STD)
                total += F.nll_loss(output, target, reduction="sum").item()
                correct += (output.argmax(1) == target).sum().item()
                seen += len(target)
        val_losses.append(total / len(dataset))  # the example divides by the whole data set's length
        epoch_acc += 100.0 * correct / seen
    accs.append(epoch_acc / FOLDS)

compare("k-fold: training losses", numbers_after("Loss:", out), losses, rtol=1e-4)
compare("k-fold: validation losses", numbers_after("Average loss:", out), val_losses, rtol=0, atol=2e-4)
compare("k-fold: epochs' mean accuracy", numbers_after("Average acc: tensor(", out), accs, rtol=1e-6)
