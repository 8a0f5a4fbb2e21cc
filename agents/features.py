"""The adversary's eyes: a relation network pre-trained on question answering, as features.

`relational_features` runs the relation network up to its last relational layer:
the sum over object pairs of g(o_i, o_j, q) (the global vector) and each object's
encoding (one vector per head slot). `RelationalFeatures` wraps it as a
stable-baselines3 features extractor; `FeatureCache` serves the frozen case
without running the network on a step: the adversary's input is the item's
original scene, so the features of an item never change, and a head assignment
only permutes the object encodings.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

from envs.items import MAX_OBJECTS, ItemPool
from envs.observation import encode
from players.state.models import StateBatch, StateRelationNetwork


def relational_features(
    network: StateRelationNetwork,
    positions: torch.Tensor,
    attributes: torch.Tensor,
    present: torch.Tensor,
    words: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(global (B, W), objects (B, N, W)): the relation network before its f."""
    return network.relations(StateBatch(positions, attributes, present, words))


class ObservationReader:
    """Env observation tensors -> the relation network's inputs (word ids remapped to its vocabulary)."""

    def __init__(self, word_map: np.ndarray):
        self.word_map = torch.as_tensor(word_map, dtype=torch.long)

    def __call__(self, objects: torch.Tensor, question: torch.Tensor) -> tuple[torch.Tensor, ...]:
        positions = objects[..., 0:2]
        present = objects[..., 2] > 0.5
        attributes = objects[..., 3:].round().long()
        words = self.word_map.to(question.device)[question.round().long().clamp(0, len(self.word_map) - 1)]
        return positions, attributes, present, words


class RelationalFeatures(BaseFeaturesExtractor):
    """SB3 extractor: [global (W) | slot encodings (10 W) | presence (10)]."""

    def __init__(self, observation_space: spaces.Dict, network: StateRelationNetwork,
                 word_map: np.ndarray, freeze: bool = True):
        width = network.config.width
        super().__init__(observation_space, features_dim=width + MAX_OBJECTS * width + MAX_OBJECTS)
        self.network = network
        self.read = ObservationReader(word_map)
        self.global_dim = self.slot_dim = width
        self.frozen = freeze
        if freeze:
            network.requires_grad_(False)
            network.eval()

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        positions, attributes, present, words = self.read(observations["objects"], observations["question"])
        with torch.set_grad_enabled(not self.frozen and torch.is_grad_enabled()):
            g, objects = relational_features(self.network, positions, attributes, present, words)
        return torch.cat([g, objects.flatten(1), present.float()], dim=1)


class FeatureCache:
    """Frozen features of every item of a pool, computed once: (global (I, W), objects (I, 10, W))."""

    def __init__(self, network: StateRelationNetwork, word_map: np.ndarray, pool: ItemPool,
                 batch: int = 256, device: str = "cpu"):
        read = ObservationReader(word_map)
        identity = np.tile(np.arange(MAX_OBJECTS), (len(pool), 1))
        obs = encode(pool, np.arange(len(pool)), identity)
        globals_, objects_ = [], []
        network.eval()
        with torch.no_grad():
            for start in range(0, len(pool), batch):
                part = {k: torch.as_tensor(v[start:start + batch], device=device) for k, v in obs.items()}
                g, objects = relational_features(network, *read(part["objects"], part["question"]))
                globals_.append(g)
                objects_.append(objects)
        self.globals = torch.cat(globals_)
        self.objects = torch.cat(objects_)
        self.present = torch.as_tensor(pool.present, device=device)
        self.global_dim = self.slot_dim = network.config.width

    def parameters(self) -> list[torch.nn.Parameter]:
        return []  # frozen: nothing of the network is trained

    def lookup(self, indices: np.ndarray, heads: np.ndarray, observation: dict[str, np.ndarray] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(global, slot encodings, presence) of items under head assignments (B, 10).

        The observation is not needed: an item's features never change.
        """
        rows = torch.as_tensor(indices, dtype=torch.long)
        slots = torch.as_tensor(heads, dtype=torch.long)
        objects = self.objects[rows[:, None], slots]
        return self.globals[rows], objects, self.present[rows[:, None], slots].float()


class LiveFeatures:
    """Features computed on every step, with gradients: the fine-tuning counterpart of FeatureCache."""

    def __init__(self, network: StateRelationNetwork, word_map: np.ndarray, pool: ItemPool):
        self.network, self.pool = network, pool
        self.read = ObservationReader(word_map)
        width = network.config.width
        self.global_dim = self.slot_dim = width
        network.train()

    def parameters(self) -> list[torch.nn.Parameter]:
        return list(self.network.parameters())

    def lookup(self, indices: np.ndarray, heads: np.ndarray, observation: dict[str, np.ndarray] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Features of items under head assignments, read from the env's observation when given."""
        obs = observation if observation is not None else encode(self.pool, np.asarray(indices), np.asarray(heads))
        positions, attributes, present, words = self.read(torch.as_tensor(obs["objects"]),
                                                          torch.as_tensor(obs["question"]))
        g, objects = relational_features(self.network, positions, attributes, present, words)
        return g, objects, present.float()
