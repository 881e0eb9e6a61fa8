# mode: check
"""PPO on CartPole with a policy network and environment rollouts, in the
shape of Lightning's examples/fabric/reinforcement_learning."""
import os
import time
from datetime import datetime

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.distributions import Categorical
from torch.utils.data import BatchSampler, DistributedSampler, RandomSampler

from lightning.fabric import Fabric
from lightning.fabric.loggers import TensorBoardLogger


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class PPOAgent(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, act_dim), std=0.01),
        )

    def get_action(self, x, action=None):
        logits = self.actor(x)
        distribution = Categorical(logits=logits)
        if action is None:
            action = distribution.sample()
        return action, distribution.log_prob(action), distribution.entropy()

    def get_value(self, x):
        return self.critic(x)

    def forward(self, x, action=None):
        action, logprob, entropy = self.get_action(x, action)
        return action, logprob, entropy, self.get_value(x)


def train(fabric, agent, optimizer, data, global_step, update_epochs=4, clip_coef=0.2):
    indexes = list(range(data["obs"].shape[0]))
    sampler = BatchSampler(RandomSampler(indexes), batch_size=64, drop_last=False)
    for epoch in range(update_epochs):
        for batch_idxes in sampler:
            _, newlogprob, entropy, newvalue = agent(data["obs"][batch_idxes], data["actions"].long()[batch_idxes])
            logratio = newlogprob - data["logprobs"][batch_idxes]
            ratio = logratio.exp()
            advantages = data["advantages"][batch_idxes]
            pg_loss = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
            v_loss = F.mse_loss(newvalue.view(-1), data["returns"][batch_idxes])
            loss = pg_loss + 0.5 * v_loss - 0.01 * entropy.mean()
            optimizer.zero_grad(set_to_none=True)
            fabric.backward(loss)
            fabric.clip_gradients(agent, optimizer)  # error: You have to specify either `clip_val` or `max_norm` to do gradient clipping!
            optimizer.step()


def main(num_envs=4, num_steps=128, total_timesteps=100000, seed=42):
    logger = TensorBoardLogger(root_dir=os.path.join("logs", datetime.today().strftime("%Y-%m-%d_%H-%M-%S")))
    fabric = Fabric(accelerator="cpu", loggers=logger)
    fabric.launch()
    fabric.seed_everything(seed)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(num_envs)])
    agent = PPOAgent(4, 2)
    optimizer = optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    agent, optimizer = fabric.setup(agent, optimizer)

    obs = torch.zeros((num_steps, num_envs, 4), device=fabric.device)
    rewards = torch.zeros((num_steps, num_envs), device=fabric.device)
    global_step = 0
    start_time = time.time()
    next_obs = torch.tensor(envs.reset(seed=seed)[0], device=fabric.device)
    num_updates = total_timesteps // (num_envs * num_steps)
    for update in range(1, num_updates + 1):
        for step in range(0, num_steps):
            global_step += num_envs
            obs[step] = next_obs
            with torch.no_grad():
                action, logprob, _, value = agent(next_obs)
            next_obs, reward, done, truncated, info = envs.step(action.cpu().numpy())
            rewards[step] = torch.tensor(reward, device=fabric.device).view(-1)
            next_obs = torch.tensor(next_obs, device=fabric.device)
        data = {"obs": obs.reshape((-1, 4)), "returns": rewards.reshape(-1)}
        train(fabric, agent, optimizer, data, global_step)
        fabric.log("Time/step_per_second", int(global_step / (time.time() - start_time)), global_step)
    envs.close()


if __name__ == "__main__":
    main()
