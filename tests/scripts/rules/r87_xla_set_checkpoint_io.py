# mode: check
# args: --assume=xla
# XLA's strategies take only an XLACheckpointIO (a .py: a .fab on XLA is rule `unsupported`).
from lightning.fabric import Fabric

fabric = Fabric(accelerator="tpu", devices=8, strategy="xla")
fabric.strategy.checkpoint_io = "io.ckpt"  # error: The XLA strategy can only work with the `XLACheckpointIO` plugin, found io.ckpt
single = Fabric(accelerator="tpu", devices=1)
single.strategy.checkpoint_io = 5  # error: The XLA strategy can only work with the `XLACheckpointIO` plugin, found 5
