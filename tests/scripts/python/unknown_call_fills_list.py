# mode: check
# warnings: exact
"""A call the checker does not model may fill a list or dict it is given,
as Lightning's reinforcement_learning/train_fabric_decoupled.py relies on:
`metrics = [None]; collective.broadcast_object_list(metrics, src=1)` leaves
a dict in metrics[0].  After such a call the named container is unknown, so
neither log_dict(metrics[0]) nor data["obs"] is an error; a container no
unknown call was given keeps its contents."""
import lightning as L
import torch.distributed as dist

fabric = L.Fabric(accelerator="cpu")


def player(collective):
    metrics = [None]
    collective.broadcast_object_list(metrics, src=1)
    fabric.log_dict(metrics[0], 1)
    data = [None]
    dist.scatter_object_list(data, [None, {"obs": 1}], src=0)
    data = data[0]
    print(data["obs"])
    options = {}
    collective.configure(options=options)
    print(options["lr"])
    kept = [None]
    fabric.log_dict(kept[0], 1)  # error: log_dict() argument 'metrics' must be dict, not NoneType


player(object())
