# mode: check
# warnings: exact
# args: --assume=xla
# XLA's own precision plugin.
from lightning.fabric import Fabric
from lightning.fabric.plugins import XLAPrecision

fabric = Fabric(accelerator="tpu", devices=8, strategy="xla", plugins=XLAPrecision("bf16-true"))
