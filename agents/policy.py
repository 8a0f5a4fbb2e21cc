"""The adversary's actor-critic: ten object heads over relational features, and a critic.

Features come from a relation-network encoder (see agents.features): a global
vector (the sum of g over object pairs with the question) and one embedding per
head slot. Each head reads the global vector with its own slot's embedding through
one shared MLP (so the policy is equivariant to the random head assignment) and
emits 7 logits for x and 7 for y; empty heads are masked to `stay`. The critic is
a three-layer relu network predicting the reward through 1.2 * tanh.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from agents.distribution import (
    NUM_BINS,
    NUM_HEADS,
    STAY_BIN,
    BatchedMultiCategorical,
    mask_empty_heads,
)

VALUE_SCALE = 1.2  # rewards lie in [-0.8, 1]; 1.2 * tanh covers them with room to spare


class ScaledTanh(nn.Module):
    def __init__(self, scale: float = VALUE_SCALE):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * torch.tanh(x)


class AdversaryHeads(nn.Module):
    """(global, slots, present) -> masked logits (B, 10, 2, 7) and critic hidden state."""

    def __init__(self, global_dim: int, slot_dim: int, hidden: int = 128, critic_hidden: int = 64,
                 stay_bias: float = 4.4):
        super().__init__()
        self.global_dim, self.slot_dim = global_dim, slot_dim
        self.actor = nn.Sequential(
            nn.Linear(global_dim + slot_dim, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 2 * NUM_BINS),
        )
        # Start near the original scene: a uniform policy moves every object at once, which is
        # almost always an invalid scene (isr), and the agent then learns only to stand still.
        with torch.no_grad():
            last = self.actor[-1]
            last.weight.mul_(0.1)
            last.bias.zero_()
            last.bias.view(2, NUM_BINS)[:, STAY_BIN] = stay_bias
        self.critic_body = nn.Sequential(
            nn.Linear(global_dim, hidden), nn.ReLU(),
            nn.Linear(hidden, critic_hidden), nn.ReLU(),
        )
        # SB3 names: latent sizes of the actor and critic outputs.
        self.latent_dim_pi = NUM_HEADS * 2 * NUM_BINS
        self.latent_dim_vf = critic_hidden

    def split(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        g = features[:, : self.global_dim]
        slots = features[:, self.global_dim: self.global_dim + NUM_HEADS * self.slot_dim]
        present = features[:, self.global_dim + NUM_HEADS * self.slot_dim:]
        return g, slots.reshape(-1, NUM_HEADS, self.slot_dim), present

    def logits(self, g: torch.Tensor, slots: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([g[:, None, :].expand(-1, NUM_HEADS, -1), slots], dim=-1)
        raw = self.actor(joined).reshape(-1, NUM_HEADS, 2, NUM_BINS)
        return mask_empty_heads(raw, present)

    # SB3's mlp_extractor interface
    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return self.logits(*self.split(features)).flatten(1)

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return self.critic_body(features[:, : self.global_dim])


def value_head(critic_hidden: int = 64) -> nn.Module:
    return nn.Sequential(nn.Linear(critic_hidden, 1), ScaledTanh())


class AdversaryPolicy(ActorCriticPolicy):
    """SB3 ActorCriticPolicy with the adversary's heads, critic and batched distribution.

    Use with `features_extractor_class=agents.features.RelationalFeatures`.
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.MultiDiscrete,
                 lr_schedule: Any, head_hidden: int = 128, **kwargs: Any):
        self.head_hidden = head_hidden
        kwargs.setdefault("ortho_init", False)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build_mlp_extractor(self) -> None:
        extractor = self.features_extractor
        self.mlp_extractor = AdversaryHeads(extractor.global_dim, extractor.slot_dim, self.head_hidden)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_dist = BatchedMultiCategorical()
        self.action_net = nn.Identity()
        self.value_net = value_head(self.mlp_extractor.latent_dim_vf)
        # Parameters changed after SB3 built its optimiser: build it again over the real ones.
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_action_dist_from_latent(self, latent_pi: torch.Tensor) -> BatchedMultiCategorical:
        return self.action_dist.proba_distribution(self.action_net(latent_pi))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["head_hidden"] = self.head_hidden
        return data
