"""The DCGAN port against its PyTorch twin (torch 1.13).

Usage: port_dcgan.py FABRICSCRIPT TMPDIR.

examples/ports/dcgan.fab runs one epoch of 20 batches of 16 (the first 320
Fashion-MNIST training images, nz=16, ngf=ndf=8) and, with `record`, saves
the Generator's and Discriminator's weights after weights_init (init.ckpt)
and at the end every step's noise batch and both losses at full precision
(run.pt).  The twin builds the same Generator and Discriminator in torch.nn,
loads the weights, and replays the example's step with the recorded noise:
D's real and fake losses backward, D's Adam step, G's loss through the
updated D backward, G's Adam step, BCELoss throughout.  The batches are
the same because the port's loader shuffles with
torch.Generator().manual_seed(999) and the twin's torch DataLoader does too
(same draws: the loader's base seed, then randperm).  Every one of the 20
losses of D and of G must agree within 1e-5 relative."""
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from ports_common import compare, fashion_mnist, run_port, setup_torch  # noqa: E402

fs, tmp = sys.argv[1], sys.argv[2]
SIZE, BATCH, NZ, NGF, NDF, NC, LR, BETA1 = 320, 16, 16, 8, 8, 1, 0.0002, 0.5


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 4, 7, 1, 0, bias=False), nn.BatchNorm2d(NGF * 4), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NC, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(NC, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, 1, 7, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input)


run_port(fs, "dcgan.fab", num_epochs=1, dataset_size=SIZE, batch_size=BATCH, nz=NZ, ngf=NGF, ndf=NDF,
         record=tmp, output_dir=f"{tmp}/outputs")

setup_torch()
init = torch.load(f"{tmp}/init.ckpt")
generator, discriminator = Generator(), Discriminator()
generator.load_state_dict(init["generator"])  # strict: torch's names
discriminator.load_state_dict(init["discriminator"])
record = torch.load(f"{tmp}/run.pt")
criterion = nn.BCELoss()
optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=LR, betas=(BETA1, 0.999))
optimizer_g = torch.optim.Adam(generator.parameters(), lr=LR, betas=(BETA1, 0.999))
xs, ys = fashion_mnist(True, SIZE)
loader = DataLoader(TensorDataset(xs, ys), batch_size=BATCH, shuffle=True,
                    generator=torch.Generator().manual_seed(999))
losses_g, losses_d = [], []
for i, data in enumerate(loader):
    discriminator.zero_grad()
    real = (data[0] - 0.5) / 0.5
    label = torch.full((real.size(0),), 1.0)
    err_d_real = criterion(discriminator(real).view(-1), label)
    err_d_real.backward()
    fake = generator(record["noise"][i])
    label.fill_(0.0)
    err_d_fake = criterion(discriminator(fake.detach()).view(-1), label)
    err_d_fake.backward()
    optimizer_d.step()
    generator.zero_grad()
    label.fill_(1.0)
    err_g = criterion(discriminator(fake).view(-1), label)
    err_g.backward()
    optimizer_g.step()
    losses_g.append(err_g.item())
    losses_d.append((err_d_real + err_d_fake).item())

compare("DCGAN: discriminator losses", record["losses_d"], losses_d, rtol=1e-5)
compare("DCGAN: generator losses", record["losses_g"], losses_g, rtol=1e-5)
