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
from torch.utils.data import DataLoader, Subset, SubsetRandomSampler, TensorDataset

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from net_twin import Net, evaluate, run_net_port, train_pass  # noqa: E402
from ports_common import compare, fashion_mnist, numbers_after, setup_torch  # noqa: E402

fs, tmp = sys.argv[1], sys.argv[2]
CHANNELS, HIDDEN, BATCH, SIZE, FOLDS, EPOCHS, LR, SEED = 4, 16, 32, 320, 2, 2, 1.0, 1

out = run_net_port(fs, "kfold_cv.fab", tmp, epochs=EPOCHS, folds=FOLDS, dataset_size=SIZE, batch_size=BATCH,
                   channels=CHANNELS, hidden=HIDDEN, lr=LR, seed=SEED)

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
        losses += train_pass(models[fold], optimizers[fold], train_loader)
        total, correct, seen = evaluate(models[fold], val_loader)
        val_losses.append(total / len(dataset))  # the example divides by the whole data set's length
        epoch_acc += 100.0 * correct / seen
    accs.append(epoch_acc / FOLDS)

compare("k-fold: training losses", numbers_after("Loss:", out), losses, rtol=1e-4)
compare("k-fold: validation losses", numbers_after("Average loss:", out), val_losses, rtol=0, atol=2e-4)
compare("k-fold: epochs' mean accuracy", numbers_after("Average acc: tensor(", out), accs, rtol=1e-6)
