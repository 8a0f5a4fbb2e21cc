"""One batched categorical over (B, 20, 7) for the adversary's 20 action dimensions.

SB3's MultiCategoricalDistribution builds 20 torch Categorical objects per call;
this gives the same log-probabilities and entropies from one tensor. Heads with
no object are masked to always choose `stay` (log-probability 0, entropy 0), so
they neither add noise to the gradient nor to the entropy bonus.
"""

from __future__ import annotations

import torch
from stable_baselines3.common.distributions import Distribution
from torch import nn

from envs.items import MAX_OBJECTS as NUM_HEADS
from envs.moves import NUM_BINS, STAY_BIN

_MASKED = -1e9


def mask_empty_heads(logits: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """(B, 10, 2, 7) logits, (B, 10) presence -> logits where empty heads can only stay."""
    stay_only = torch.full((NUM_BINS,), _MASKED, device=logits.device, dtype=logits.dtype)
    stay_only[STAY_BIN] = 0.0
    return torch.where(present[:, :, None, None] > 0.5, logits, stay_only)


class BatchedMultiCategorical(Distribution):
    """Independent categoricals over `dims` equal-sized dimensions, held as one tensor."""

    def __init__(self, dims: int = 2 * NUM_HEADS, bins: int = NUM_BINS):
        super().__init__()
        self.dims, self.bins = dims, bins
        self.log_probs: torch.Tensor | None = None

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:
        # The adversary's heads already emit logits: nothing to add.
        return nn.Identity()

    def proba_distribution(self, action_logits: torch.Tensor) -> BatchedMultiCategorical:
        self.log_probs = torch.log_softmax(action_logits.reshape(-1, self.dims, self.bins), dim=-1)
        return self

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        picked = self.log_probs.gather(-1, actions.long().reshape(-1, self.dims, 1)).squeeze(-1)
        return picked.sum(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.log_probs.exp() * self.log_probs).sum((-1, -2))

    def sample(self) -> torch.Tensor:
        # Gumbel-max: one argmax instead of 20 multinomial draws.
        uniform = torch.rand_like(self.log_probs).clamp_(1e-10, 1.0 - 1e-7)
        return (self.log_probs - torch.log(-torch.log(uniform))).argmax(-1)

    def mode(self) -> torch.Tensor:
        return self.log_probs.argmax(-1)

    def actions_from_params(self, action_logits: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        self.proba_distribution(action_logits)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, action_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        actions = self.actions_from_params(action_logits)
        return actions, self.log_prob(actions)
