# mode: check
"""MAML on Omniglot with learn2learn, in the shape of Lightning's
examples/fabric/meta_learning."""
import cherry
import learn2learn as l2l
import torch

from lightning.fabric import Fabric, seed_everything


def accuracy(predictions, targets):
    predictions = predictions.argmax(dim=1).view(targets.shape)
    return (predictions == targets).sum().float() / targets.size(0)


def fast_adapt(batch, learner, loss, adaptation_steps, shots, ways):
    data, labels = batch
    adaptation_indices = torch.zeros(data.size(0), dtype=torch.bool)
    adaptation_indices[torch.arange(shots * ways) * 2] = True
    evaluation_indices = ~adaptation_indices
    adaptation_data, adaptation_labels = data[adaptation_indices], labels[adaptation_indices]
    evaluation_data, evaluation_labels = data[evaluation_indices], labels[evaluation_indices]
    for step in range(adaptation_steps):
        train_error = loss(learner(adaptation_data), adaptation_labels)
        learner.adapt(train_error)
    predictions = learner(evaluation_data)
    valid_error = loss(predictions, evaluation_labels)
    valid_accuracy = accuracy(predictions, evaluation_labels)
    return valid_error, valid_accuracy


def main(ways=5, shots=1, meta_lr=0.003, fast_lr=0.5, meta_batch_size=32, adaptation_steps=1,
         num_iterations=60000, seed=42):
    fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
    fabric.launch()
    meta_batch_size = meta_batch_size // fabric.world_size
    seed_everything(seed + fabric.global_rank)

    tasksets = l2l.vision.benchmarks.get_tasksets(
        "omniglot", train_ways=ways, train_samples=2 * shots, test_ways=ways, test_samples=2 * shots,
        num_tasks=20000, root="~/data",
    )
    model = l2l.vision.models.OmniglotFC(28**2, ways)
    model = fabric.setup_module(model)
    maml = l2l.algorithms.MAML(model, lr=fast_lr, first_order=False)
    optimizer = torch.optim.Adam(maml.parameters(), meta_lr)
    optimizer = fabric.setup_optimizers(optimizer)
    loss = torch.nn.CrossEntropyLoss(reduction="mean")

    for iteration in range(num_iterations):
        optimizer.zero_grad()
        meta_train_error = 0.0
        meta_train_accuracy = 0.0
        for task in range(meta_batch_size):
            learner = maml.clone()
            batch = fabric.to_device(tasksets.train.sample())
            evaluation_error, evaluation_accuracy = fast_adapt(batch, learner, loss, adaptation_steps, shots, ways)
            fabric.backward(evaluation_error)
            meta_train_error += evaluation_error.item()
            meta_train_accuracy += evaluation_accuracy.item()
        meta_train_error = fabric.all_reduc(meta_train_error)  # error: 'Fabric' object has no attribute 'all_reduc'
        fabric.print(f"Iteration {iteration}: meta train error {meta_train_error / meta_batch_size}")
        for p in maml.parameters():
            p.grad.data.mul_(1.0 / meta_batch_size)
        optimizer.step()


if __name__ == "__main__":
    main()
