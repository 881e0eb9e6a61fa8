# mode: check
# warnings: exact
# args: --assume=xla
# None leaves the strategy's own XLACheckpointIO in place.
from lightning.fabric import Fabric

fabric = Fabric(accelerator="tpu", devices=8, strategy="xla")
fabric.strategy.checkpoint_io = None
