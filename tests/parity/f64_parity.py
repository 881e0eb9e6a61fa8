"""precision="64-true" against torch 1.13's float64 training.

Usage: f64_parity.py FABRICSCRIPT TMPDIR.

Two FabricScript runs with Fabric(precision="64-true") on one CPU device,
each replayed by torch with Lightning's DoublePrecision by hand: the module
.double(), float inputs .double() into the forward, floating outputs
.float() (torch's default dtype) out of it, optimizer states in float64.
  mlp:   Sequential MLP with Adam; the loss is taken outside the forward, so
         it is float32 (Fabric converts the logits back) and its gradient
         reaches the float64 logits through the cast.  float32 roundings
         of the loss path (one float32 ulp, 6e-8, at the first steps,
         which Adam's normalized steps carry on) bound the agreement: losses
         and parameters within 1e-5 relative after 30 steps (measured 1.1e-7
         and 1.1e-6).
  class: a Module class whose forward returns the cross-entropy, trained
         with SGD (momentum, nesterov, weight decay) and gradient clipping
         to norm 0.5: every op is float64,
         so the parameters agree within 1e-10 relative after 40 steps
         (measured 3.2e-16) and the losses (float64, printed after Fabric's
         float32 conversion) within 1e-7 (one float32 rounding; measured 0).
  gpt:   parity.py's small GPT (2 blocks, dim 32, 2 heads, 16 tokens) inside
         a Module class whose forward returns the cross-entropy, AdamW with
         clipping to norm 1.0, 20 steps: every op float64 (embeddings,
         layer norm, fused causal attention, GELU); parameters within 1e-10
         relative (measured 5.2e-12: Adam's normalized steps amplify the
         last bits, e.g. of the key bias, whose gradient is zero in exact
         arithmetic), losses within 1e-7 (measured 0).
  ops:   a Module class whose forward runs masked_fill, where, maximum,
         scaled_dot_product_attention with a boolean mask, max over a dim
         and over everything, indexing by a tensor, cross_entropy with
         class weights and label smoothing, nll_loss, mse, l1, smooth_l1,
         huber, binary_cross_entropy (with and without logits, pos_weight)
         and kl_div, all float64, trained 25 steps each with RMSprop
         (centered, momentum, weight decay), Adagrad (lr_decay, initial
         accumulator, weight decay) and Adadelta (weight decay), clipped to
         norm 2.0: parameters within 1e-10 relative (measured 3.3e-15,
         5.2e-16 and 6.1e-16), losses within 1e-7 (one float32 rounding;
         measured 0).  Dropout's mask is this runtime's (torch draws its own),
         so dropout is checked by test_rt_f64, not here.
  cnn:   Conv2d (also grouped), BatchNorm2d (training, then eval on its
         running statistics), MaxPool2d, ConvTranspose2d, GroupNorm,
         AvgPool2d with padding, AdaptiveAvgPool2d, Conv1d, RMSNorm (torch
         2.4's formula, written out: 1.13 has none), SGD with momentum and
         clipping, 12 steps: every op float64; parameters within 1e-12
         relative (measured 6.1e-15), losses within 1e-7 (measured 0).
  seq:   a Module class whose forward runs cumsum along two dims and
         logsumexp over a dim (kept and not) on its activations and
         logits, SGD with momentum and clipping, 15 steps: every op
         float64; parameters within 1e-12 relative (measured 6.5e-16),
         losses within 1e-7 (measured 0).
The final parameters are read from fabric.save's checkpoint (DoubleStorage).
The inputs are the same float32 values in both (float32 elementwise kernels
such as cos may differ from torch's by an ulp, which float64 would then
carry).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402  the GPT twin's classes
from ports_common import run_script  # noqa: E402

fs, tmp = sys.argv[1], sys.argv[2]

MLP = f"""
fabric = Fabric(accelerator="cpu", devices=1, precision="64-true")
fabric.seed_everything(5)
model = Sequential(Linear(16, 32), Tanh(), Linear(32, 32), ReLU(), Linear(32, 4))
fabric.save("{tmp}/mlp_init.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers(Adam(model.parameters(), lr=0.01))
x = (arange(128).float().view(8, 16) / 128.0 - 0.5) * 4.0
y = tensor([0, 1, 2, 3, 0, 1, 2, 3])
for step in range(30):
    out = model(x)
    assert out.dtype == float32
    loss = cross_entropy(out, y)
    opt.zero_grad()
    fabric.backward(loss)
    opt.step()
    print(repr(loss.item()))
assert model[0].weight.dtype == float64 and model[0].weight.grad.dtype == float64
fabric.save("{tmp}/mlp_final.ckpt", {{"model": model}})
"""


def fab_train(name, steps, max_norm):
    """The .fab training loop of a Module whose forward returns the loss, with
    clipping to max_norm, printing each loss; then the final checkpoint."""
    return f"""for step in range({steps}):
    loss = model(x, y)
    opt.zero_grad()
    fabric.backward(loss)
    fabric.clip_gradients(model, opt, max_norm={max_norm})
    opt.step()
    print(repr(loss.item()))
fabric.save("{tmp}/{name}_final.ckpt", {{"model": model}})
"""

CLASS = f"""
class Net(Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(12, 24)
        self.fc2 = Linear(24, 3)
        self.act = GELU()

    def forward(self, x, y):
        h = self.act(self.fc1(x)) * 0.5 + self.fc1(x).sigmoid() * 0.25
        return cross_entropy(self.fc2(h) / 1.5, y)

fabric = Fabric(accelerator="cpu", devices=1, precision="64-true")
fabric.seed_everything(11)
model = Net()
fabric.save("{tmp}/class_init.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers(SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3))
x = (arange(96).float().view(8, 12) / 96.0 - 0.5) * 3.0
y = tensor([0, 1, 2, 0, 1, 2, 0, 1])
{fab_train("class", 40, 0.5)}"""


def run(name, script):
    return [float(line) for line in run_script(fs, tmp, name, script).split()]


def replay(name, model, make_opt, steps, loss_of, max_norm=None):
    """torch's float64 training from the run's {name}_init.ckpt, as Lightning's
    DoublePrecision does it (the module .double()): the losses of each step;
    loss_of(model) is one step's loss, clipped to max_norm when given."""
    model.load_state_dict(torch.load(f"{tmp}/{name}_init.ckpt")["model"])
    model.double()
    opt = make_opt(model.parameters())
    want = []
    for step in range(steps):
        loss = loss_of(model)
        opt.zero_grad()
        loss.backward()
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        want.append(loss.item())
    return want


def rel(a, b):
    return (a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)


def compare(name, got, want, final, model, loss_tol, param_tol):
    worst_loss = max(abs(g - w) / abs(w) for g, w in zip(got, want))
    theirs = torch.load(final)["model"]
    worst_param = 0.0
    for k, v in model.state_dict().items():
        if not v.is_floating_point():  # BatchNorm's num_batches_tracked: int64 in both, the same count
            if not torch.equal(theirs[k], v):
                raise SystemExit(f"FAIL {name}: {k} is {theirs[k]}, torch's {v}")
            continue
        if theirs[k].dtype != torch.float64:
            raise SystemExit(f"FAIL {name}: {k} saved as {theirs[k].dtype}, not torch.float64")
        worst_param = max(worst_param, rel(theirs[k], v))
    print(f"{name}: {len(got)} losses within {worst_loss:.2e} relative (bound {loss_tol}), "
          f"parameters within {worst_param:.2e} relative (bound {param_tol})")
    if len(got) != len(want) or worst_loss > loss_tol or worst_param > param_tol:
        raise SystemExit(f"FAIL {name}")


# ---- mlp: Fabric's convert_output makes the loss float32 ----
got = run("mlp", MLP)
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
x = (torch.arange(128).float().view(8, 16) / 128.0 - 0.5) * 4.0
y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
want = replay("mlp", model, lambda p: torch.optim.Adam(p, lr=0.01), 30,
              lambda m: F.cross_entropy(m(x.double()).float(), y))
compare("mlp", got, want, f"{tmp}/mlp_final.ckpt", model, 1e-5, 1e-5)


# ---- class: the loss inside the forward, every op float64 ----
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 24)
        self.fc2 = nn.Linear(24, 3)

    def forward(self, x, y):
        h = F.gelu(self.fc1(x)) * 0.5 + self.fc1(x).sigmoid() * 0.25
        return F.cross_entropy(self.fc2(h) / 1.5, y)


got = run("class", CLASS)
model = Net()
x = (torch.arange(96).float().view(8, 12) / 96.0 - 0.5) * 3.0
y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
want = replay("class", model, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
              40, lambda m: m(x.double(), y).float(), max_norm=0.5)
compare("class", got, want, f"{tmp}/class_final.ckpt", model, 1e-7, 1e-10)

# ---- gpt: the twin of parity.py's GPT, the loss inside the forward ----
GPT = f"""
model Block(dim, heads):
    residual:
        LayerNorm(dim)
        CausalSelfAttention(dim, heads)
    residual:
        LayerNorm(dim)
        Linear(dim, 4 * dim)
        GELU()
        Linear(4 * dim, dim)

model GPT(vocab=256, context=16, dim=32, heads=2, layers=2):
    wte = Embedding(vocab, dim)
    wpe = PositionalEmbedding(context, dim)
    h = repeat layers:
        Block(dim, heads)
    ln_f = LayerNorm(dim)
    lm_head = Linear(dim, vocab, bias=False)

class LM(Module):
    def __init__(self):
        super().__init__()
        self.gpt = GPT()

    def forward(self, x, y):
        return cross_entropy(self.gpt(x), y)

fabric = Fabric(accelerator="cpu", devices=1, precision="64-true")
fabric.seed_everything(3)
model = LM()
fabric.save("{tmp}/gpt_init.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers(AdamW(model.parameters(), lr=3e-3, weight_decay=0.1))
x = tensor([[((i * 16 + t) * 37 + 11) % 256 for t in range(16)] for i in range(4)])
y = tensor([[((i * 16 + t) * 37 + 48) % 256 for t in range(16)] for i in range(4)])
{fab_train("gpt", 20, 1.0)}"""

class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.gpt = parity.build("gpt")

    def forward(self, x, y):
        logits = self.gpt(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


got = run("gpt", GPT)
model = LM()
x = torch.tensor([[((i * 16 + t) * 37 + 11) % 256 for t in range(16)] for i in range(4)])
y = torch.tensor([[((i * 16 + t) * 37 + 48) % 256 for t in range(16)] for i in range(4)])
want = replay("gpt", model, lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.1), 20,
              lambda m: m(x, y).float(), max_norm=1.0)
compare("gpt", got, want, f"{tmp}/gpt_final.ckpt", model, 1e-7, 1e-10)

# ---- ops: the float64 paths of where, max/min, attention, the losses; RMSprop, Adagrad, Adadelta ----
OPS_NET = """
class Net(Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(12, 16)
        self.fc2 = Linear(16, 4)

    def forward(self, x, y):
        h = self.fc1(x)
        h = h.masked_fill(h > 1.0, 1.0)
        h = where(h < -1.0, h * 0.1, h)
        q = h.view(2, 4, 4, 4)
        mask = tensor([[True, False, True, True], [True, True, False, True], [True, True, True, True], [False, True, True, True]])
        a = scaled_dot_product_attention(q, q * 0.5, q, attn_mask=mask)
        h = maximum(h, h * -0.5) + a.reshape(8, 16) * 0.5
        m, i = h.view(8, 4, 4).max(2)
        z = self.fc2(h) + m * 0.1
        t = (x[:, :4] * 0.5).sigmoid()
        w = tensor([1.0, 2.0, 0.5, 1.5])
        loss = cross_entropy(z, y, weight=w, label_smoothing=0.1) + nll_loss(z.log_softmax(1), y)
        loss = loss + mse_loss(z, t) + l1_loss(z, t) + smooth_l1_loss(z, t, beta=0.5) + huber_loss(z, t, delta=0.7)
        loss = loss + binary_cross_entropy(z.sigmoid(), t) + binary_cross_entropy_with_logits(z, t, pos_weight=w)
        loss = loss + kl_div(z.log_softmax(1), t, reduction="batchmean") + z.max() * 0.1
        return loss + z[tensor([0, 3, 3, 5])].sum() * 0.1
"""

OPS_OPTS = {
    "rmsprop": ("RMSprop(model.parameters(), lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=1e-3)",
                lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=1e-3)),
    "adagrad": ("Adagrad(model.parameters(), lr=0.1, lr_decay=0.01, weight_decay=1e-3, initial_accumulator_value=0.1)",
                lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=1e-3, initial_accumulator_value=0.1)),
    "adadelta": ("Adadelta(model.parameters(), lr=1.0, rho=0.8, weight_decay=1e-3)",
                 lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.8, weight_decay=1e-3)),
}


class OpsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x, y):
        h = self.fc1(x)
        h = h.masked_fill(h > 1.0, 1.0)
        h = torch.where(h < -1.0, h * 0.1, h)
        q = h.view(2, 4, 4, 4)
        mask = torch.tensor([[True, False, True, True], [True, True, False, True], [True, True, True, True],
                             [False, True, True, True]])
        add = torch.zeros(4, 4).masked_fill(~mask, float("-inf"))  # float32, as the runtime's additive mask
        s = q @ (q * 0.5).transpose(-2, -1) * (1.0 / 2.0) + add
        a = s.softmax(-1) @ q
        h = torch.maximum(h, h * -0.5) + a.reshape(8, 16) * 0.5
        m, i = h.view(8, 4, 4).max(2)
        z = self.fc2(h) + m * 0.1
        t = (x[:, :4] * 0.5).sigmoid()
        w = torch.tensor([1.0, 2.0, 0.5, 1.5], dtype=torch.float64)
        loss = F.cross_entropy(z, y, weight=w, label_smoothing=0.1) + F.nll_loss(z.log_softmax(1), y)
        loss = loss + F.mse_loss(z, t) + F.l1_loss(z, t) + F.smooth_l1_loss(z, t, beta=0.5) + F.huber_loss(z, t, delta=0.7)
        loss = loss + F.binary_cross_entropy(z.sigmoid(), t) + F.binary_cross_entropy_with_logits(z, t, pos_weight=w)
        loss = loss + F.kl_div(z.log_softmax(1), t, reduction="batchmean") + z.max() * 0.1
        return loss + z[torch.tensor([0, 3, 3, 5])].sum() * 0.1


x = (torch.arange(96).float().view(8, 12) / 96.0 - 0.5) * 3.0
y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
for name, (fab_opt, torch_opt) in OPS_OPTS.items():
    got = run(name, f"""{OPS_NET}
fabric = Fabric(accelerator="cpu", devices=1, precision="64-true")
fabric.seed_everything(13)
model = Net()
fabric.save("{tmp}/{name}_init.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers({fab_opt})
x = (arange(96).float().view(8, 12) / 96.0 - 0.5) * 3.0
y = tensor([0, 1, 2, 3, 0, 1, 2, 3])
{fab_train(name, 25, 2.0)}""")
    model = OpsNet()
    want = replay(name, model, torch_opt, 25, lambda m: m(x.double(), y).float(), max_norm=2.0)
    compare(name, got, want, f"{tmp}/{name}_final.ckpt", model, 1e-7, 1e-10)
# ---- cnn: convolutions, pooling and the normalizations, every op float64 ----
CNN_FAB = f"""
class Net(Module):
    def __init__(self):
        super().__init__()
        self.c1 = Conv2d(2, 4, 3, padding=1)
        self.bn = BatchNorm2d(4)
        self.pool = MaxPool2d(2)
        self.up = ConvTranspose2d(4, 4, 2, stride=2)
        self.c2 = Conv2d(4, 6, 3, padding=1, groups=2)
        self.gn = GroupNorm(3, 6)
        self.ap = AvgPool2d(3, stride=2, padding=1)
        self.aap = AdaptiveAvgPool2d((1, 1))
        self.c3 = Conv1d(6, 5, 2, stride=2, padding=1)
        self.rn = RMSNorm(5)
        self.fc = Linear(5, 3)

    def forward(self, x, y):
        h = self.pool(self.bn(self.c1(x)).relu())
        h = self.ap(self.gn(self.c2(self.up(h))).tanh())
        h = self.c3(self.aap(h).view(4, 6, 1).expand(4, 6, 3))
        return cross_entropy(self.fc(self.rn(h.mean(dim=2))), y)

fabric = Fabric(accelerator="cpu", devices=1, precision="64-true")
fabric.seed_everything(7)
model = Net()
fabric.save("{tmp}/cnn_init.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers(SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3))
a = arange(512).float().view(4, 2, 8, 8) / 256.0 - 1.0
x = a * a * 3.0 - a
y = tensor([0, 1, 2, 0])
{fab_train("cnn", 12, 1.0)}model.eval()
print(repr(model(x, y).item()))
"""


class RMSNorm(nn.Module):
    """torch 2.4's nn.RMSNorm (eps=None: finfo(x.dtype).eps), which 1.13 lacks"""
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.c2 = nn.Conv2d(4, 6, 3, padding=1, groups=2)
        self.gn = nn.GroupNorm(3, 6)
        self.ap = nn.AvgPool2d(3, stride=2, padding=1)
        self.aap = nn.AdaptiveAvgPool2d((1, 1))
        self.c3 = nn.Conv1d(6, 5, 2, stride=2, padding=1)
        self.rn = RMSNorm(5)
        self.fc = nn.Linear(5, 3)

    def forward(self, x, y):
        h = self.pool(F.relu(self.bn(self.c1(x))))
        h = self.ap(torch.tanh(self.gn(self.c2(self.up(h)))))
        h = self.c3(self.aap(h).view(4, 6, 1).expand(4, 6, 3))
        return F.cross_entropy(self.fc(self.rn(h.mean(dim=2))), y)


# Every op float64 (im2col + dgemm here, torch's own double convolutions
# there: the sums' orders differ in the last bits); 12 steps of SGD with
# momentum and clipping, then one eval-mode forward on the running
# statistics: parameters (running statistics included) within 1e-12
# relative (measured 6.1e-15), losses within 1e-7 (float32 prints; 0).
got = run("cnn", CNN_FAB)
model = CNN()
a = torch.arange(512).float().view(4, 2, 8, 8) / 256.0 - 1.0
x = a * a * 3.0 - a
y = torch.tensor([0, 1, 2, 0])
want = replay("cnn", model, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3), 12,
              lambda m: m(x.double(), y).float(), max_norm=1.0)
model.eval()
with torch.no_grad():
    want.append(model(x.double(), y).float().item())
compare("cnn", got, want, f"{tmp}/cnn_final.ckpt", model, 1e-7, 1e-12)

# ---- seq: logsumexp and cumsum in double, forward and backward ----
SEQ_FAB = f"""
class Net(Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(12, 16)
        self.fc2 = Linear(16, 4)

    def forward(self, x, y):
        h = self.fc1(x).tanh()
        c = h.view(8, 4, 4).cumsum(1) * 0.5 + h.view(8, 4, 4).cumsum(-1) * 0.25
        h = c.reshape(8, 16) - h.logsumexp(1, keepdim=True) * 0.1
        z = self.fc2(h)
        s = z.logsumexp(0) * 0.2 + z.logsumexp(1).mean() - z[:, 0].mean()
        return cross_entropy(z, y) + s.sum() * 0.1 + (z.cumsum(0) * z).mean() * 0.05

fabric = Fabric(accelerator="cpu", devices=1, precision="64-true")
fabric.seed_everything(17)
model = Net()
fabric.save("{tmp}/seq_init.ckpt", {{"model": model}})
model = fabric.setup_module(model)
opt = fabric.setup_optimizers(SGD(model.parameters(), lr=0.1, momentum=0.9))
x = (arange(96).float().view(8, 12) / 96.0 - 0.5) * 3.0
y = tensor([0, 1, 2, 3, 0, 1, 2, 3])
{fab_train("seq", 15, 2.0)}"""


class SeqNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x, y):
        h = torch.tanh(self.fc1(x))
        c = h.view(8, 4, 4).cumsum(1) * 0.5 + h.view(8, 4, 4).cumsum(-1) * 0.25
        h = c.reshape(8, 16) - h.logsumexp(1, keepdim=True) * 0.1
        z = self.fc2(h)
        s = z.logsumexp(0) * 0.2 + z.logsumexp(1).mean() - z[:, 0].mean()
        return F.cross_entropy(z, y) + s.sum() * 0.1 + (z.cumsum(0) * z).mean() * 0.05


# Every op float64 (torch sums logsumexp's exponentials in its own order; the
# running sums are the same additions); 15 steps of SGD with momentum and
# clipping: parameters within 1e-12 relative, losses within 1e-7 (float32
# prints).
got = run("seq", SEQ_FAB)
model = SeqNet()
x = (torch.arange(96).float().view(8, 12) / 96.0 - 0.5) * 3.0
y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
want = replay("seq", model, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 15,
              lambda m: m(x.double(), y).float(), max_norm=2.0)
compare("seq", got, want, f"{tmp}/seq_final.ckpt", model, 1e-7, 1e-12)
print("ok   64-true trains as torch's float64")
