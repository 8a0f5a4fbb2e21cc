"""The adversary's own A2C loop over the batched vector env: few Python calls per step, large batches.

Episodes are one step long, so the return is the reward and A2C is a policy
gradient with the critic as baseline. With a frozen relation network the
features of every item come from a FeatureCache, and one update costs one small
MLP forward/backward over the batch plus one batched env step.

Against a strong player a move that changes an answer is rare, so two additions
keep the search alive: the entropy coefficient adapts to hold a target entropy,
and the moves that changed an answer are replayed (self-imitation) until the
critic expects them.
The loop checkpoints everything it needs (weights, optimisers, the entropy
coefficient, the replay, both random streams, the step) so a resumed run
continues exactly as an uninterrupted one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from agents.distribution import BatchedMultiCategorical
from agents.features import FeatureCache, LiveFeatures
from agents.policy import AdversaryHeads, value_head
from envs.items import MAX_OBJECTS
from envs.vector import AdversarialVectorEnv
from players.state.checkpoint import write_torch_atomic

ENTROPY_COEF_LR = 1e-2


@dataclass
class A2CConfig:
    steps: int = 20_000
    num_envs: int = 128
    learning_rate: float = 5e-4
    entropy_coef: float = 0.05
    # When set, the entropy coefficient adapts (as in SAC) to hold the mean entropy per action
    # dimension of a present object at this many nats; entropy_coef is then its starting value.
    # A fixed coefficient either collapses the policy onto `stay` (every move risks isr) or
    # spreads it over moves of every object at once (almost always invalid).
    target_entropy: float | None = 0.3
    # The target moves linearly from target_entropy to this over training (None: it stays put):
    # exploration early, the learned moves kept late.
    target_entropy_final: float | None = None
    # Upper bound on the adaptive coefficient: without it, a policy that has learned to stay is
    # pushed back into (mostly invalid) moves by an ever-growing bonus.
    max_entropy_coef: float | None = None
    # Keep the policy of the best window of updates (mean training reward over best_window
    # updates: on-policy, so no extra player queries) and evaluate that one, not the last.
    keep_best: bool = False
    best_window: int = 20
    value_coef: float = 0.5
    # Self-imitation (Oh et al. 2018): moves that changed an answer are kept and replayed while
    # their return beats the critic, so a rare flip is learned rather than drowned in noise.
    self_imitation_coef: float = 1.0
    self_imitation_batch: int = 64
    self_imitation_capacity: int = 4096
    max_grad_norm: float = 0.5
    head_hidden: int = 128
    stay_bias: float = 4.4  # P(stay) = 0.93 per axis: about one object in seven moves at first
    checkpoint_every: int = 20  # updates
    seed: int = 0


@dataclass
class History:
    """Per update: env steps so far, mean reward, invalid, changed and dropped shares of the batch.

    The batch is sampled from the policy being trained, so these shares are an
    on-policy estimate of what evaluating that policy would give.
    """

    steps: list[int] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    invalid: list[float] = field(default_factory=list)
    changed: list[float] = field(default_factory=list)
    dropped: list[float] = field(default_factory=list)


class Adversary(nn.Module):
    """Actor heads and critic over cached relational features."""

    def __init__(self, global_dim: int, slot_dim: int, head_hidden: int = 128, stay_bias: float = 4.4):
        super().__init__()
        self.heads = AdversaryHeads(global_dim, slot_dim, head_hidden, stay_bias=stay_bias)
        self.value = value_head(self.heads.latent_dim_vf)

    def forward(self, g: torch.Tensor, slots: torch.Tensor, present: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.heads.logits(g, slots, present)
        return logits, self.value(self.heads.critic_body(g)).squeeze(-1)


def policy_actions(adversary: Adversary, cache: FeatureCache | LiveFeatures, deterministic: bool = False
                   ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """An action source for agents.evaluation: the policy sampled (or its mode) per item and heads."""
    dist = BatchedMultiCategorical()

    def actions_for(indices: np.ndarray, heads: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = adversary(*cache.lookup(indices, heads))
            dist.proba_distribution(logits.flatten(1))
            return (dist.mode() if deterministic else dist.sample()).numpy()

    return actions_for


class SuccessReplay:
    """A bounded first-in-first-out store of the moves that changed an answer."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items = np.zeros(0, dtype=np.int64)
        self.heads = np.zeros((0, MAX_OBJECTS), dtype=np.int64)
        self.actions = np.zeros((0, 2 * MAX_OBJECTS), dtype=np.int64)
        self.returns = np.zeros(0, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, items: np.ndarray, heads: np.ndarray, actions: np.ndarray, returns: np.ndarray) -> None:
        if len(items) == 0:
            return
        keep = slice(-self.capacity, None)
        self.items = np.concatenate([self.items, items])[keep]
        self.heads = np.concatenate([self.heads, heads])[keep]
        self.actions = np.concatenate([self.actions, actions])[keep]
        self.returns = np.concatenate([self.returns, returns.astype(np.float32)])[keep]

    def sample(self, count: int, generator: torch.Generator
               ) -> tuple[np.ndarray, np.ndarray, torch.Tensor, torch.Tensor]:
        rows = torch.randint(len(self.items), (count,), generator=generator).numpy()
        return (self.items[rows], self.heads[rows], torch.as_tensor(self.actions[rows]),
                torch.as_tensor(self.returns[rows]))

    def state(self) -> dict:
        return {"items": self.items, "heads": self.heads, "actions": self.actions, "returns": self.returns}

    def load(self, state: dict) -> None:
        self.items, self.heads = state["items"], state["heads"]
        self.actions, self.returns = state["actions"], state["returns"]


class A2CTrainer:
    def __init__(self, env: AdversarialVectorEnv, cache: FeatureCache | LiveFeatures, config: A2CConfig,
                 checkpoint: str | os.PathLike[str] | None = None,
                 log: Callable[[int, dict], None] | None = None,
                 extra_state: Callable[[], dict] | None = None):
        self.env, self.cache, self.config = env, cache, config
        # What the caller keeps with each checkpoint (a run's query count, so a resume counts every part).
        self.extra_state = extra_state
        self.restored_extra: dict = {}
        torch.manual_seed(config.seed)
        self.adversary = Adversary(cache.global_dim, cache.slot_dim, config.head_hidden, config.stay_bias)
        self.parameters = list(self.adversary.parameters()) + list(cache.parameters())
        self.optimizer = torch.optim.Adam(self.parameters, lr=config.learning_rate)
        self.log_entropy_coef = torch.tensor(float(np.log(max(config.entropy_coef, 1e-12))), requires_grad=True)
        self.coef_optimizer = torch.optim.Adam([self.log_entropy_coef], lr=ENTROPY_COEF_LR)
        self.dist = BatchedMultiCategorical()
        self.history = History()
        self.update = 0
        self.checkpoint = Path(checkpoint) if checkpoint else None
        self.log = log
        self.env.reset(seed=config.seed)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.replay = SuccessReplay(config.self_imitation_capacity)
        self.best: dict | None = None  # {"reward", "update", "adversary", "features"}
        if self.checkpoint is not None and self.checkpoint.is_file():
            self._restore()

    @property
    def total_updates(self) -> int:
        return max(1, self.config.steps // self.config.num_envs)

    def _state(self) -> dict:
        return {
            "config": asdict(self.config), "update": self.update,
            "adversary": self.adversary.state_dict(), "optimizer": self.optimizer.state_dict(),
            "log_entropy_coef": self.log_entropy_coef.detach().clone(),
            "coef_optimizer": self.coef_optimizer.state_dict(),
            "features": [p.detach().clone() for p in self.cache.parameters()],
            "torch_rng": self.generator.get_state(), "env": self.env.get_state(),
            "history": asdict(self.history), "replay": self.replay.state(), "best": self.best,
            "extra": self.extra_state() if self.extra_state is not None else {},
        }

    def _restore(self) -> None:
        state = torch.load(self.checkpoint, weights_only=False)
        if state["config"] != asdict(self.config):
            raise ValueError(f"{self.checkpoint}: written with another configuration; remove it or use the same options")
        self.update = state["update"]
        self.adversary.load_state_dict(state["adversary"])
        with torch.no_grad():
            for param, saved in zip(self.cache.parameters(), state["features"], strict=True):
                param.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        with torch.no_grad():
            self.log_entropy_coef.copy_(state["log_entropy_coef"])
        self.coef_optimizer.load_state_dict(state["coef_optimizer"])
        self.generator.set_state(state["torch_rng"])
        self.env.set_state(state["env"])
        self.history = History(**{"dropped": [float("nan")] * len(state["history"]["steps"]), **state["history"]})
        self.replay.load(state["replay"])
        self.best = state.get("best")
        self.restored_extra = state.get("extra") or {}

    def save(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
            write_torch_atomic(self.checkpoint, self._state())

    def _sample(self) -> torch.Tensor:
        log_probs = self.dist.log_probs
        uniform = torch.rand(log_probs.shape, generator=self.generator).clamp_(1e-10, 1.0 - 1e-7)
        return (log_probs - torch.log(-torch.log(uniform))).argmax(-1)

    def _self_imitation_loss(self) -> torch.Tensor:
        items, heads, actions, returns = self.replay.sample(self.config.self_imitation_batch, self.generator)
        logits, values = self.adversary(*self.cache.lookup(items, heads))
        replayed = BatchedMultiCategorical().proba_distribution(logits.flatten(1))
        margin = (returns - values).clamp(min=0.0)
        policy = -(replayed.log_prob(actions) * margin.detach()).mean()
        return policy + 0.5 * self.config.value_coef * margin.pow(2).mean()

    def step(self) -> dict:
        """One update: act on the whole batch, step the env once, one gradient step."""
        env, cfg = self.env, self.config
        episodes = env.episodes
        items, heads = episodes.items, episodes.heads
        g, slots, present = self.cache.lookup(items, heads, episodes.observation)
        logits, values = self.adversary(g, slots, present)
        self.dist.proba_distribution(logits.flatten(1))
        actions = self._sample()
        _, rewards, _, _, infos = env.step(actions.numpy())
        returns = torch.as_tensor(rewards, dtype=torch.float32)
        advantage = returns - values.detach()
        policy_loss = -(advantage * self.dist.log_prob(actions)).mean()
        value_loss = (returns - values).pow(2).mean()
        entropy = self.dist.entropy().mean()
        coef = self.log_entropy_coef.detach().exp()
        loss = policy_loss + cfg.value_coef * value_loss - coef * entropy
        successes = infos["final_info"]["changed"]
        self.replay.add(items[successes], heads[successes], actions.numpy()[successes], rewards[successes])
        if cfg.self_imitation_coef > 0 and len(self.replay):
            loss = loss + cfg.self_imitation_coef * self._self_imitation_loss()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.parameters, cfg.max_grad_norm)
        self.optimizer.step()
        per_dimension = entropy.detach() / (2.0 * present.sum(-1).mean()).clamp(min=1.0)
        if cfg.target_entropy is not None:
            coef_loss = self.log_entropy_coef * (per_dimension - self.current_target_entropy)
            self.coef_optimizer.zero_grad(set_to_none=True)
            coef_loss.backward()
            self.coef_optimizer.step()
            if cfg.max_entropy_coef is not None:
                with torch.no_grad():
                    self.log_entropy_coef.clamp_(max=float(np.log(cfg.max_entropy_coef)))
        self.update += 1
        final = infos["final_info"]
        metrics = {
            "reward": float(returns.mean()), "invalid": float(1.0 - final["valid"].mean()),
            "changed": float(final["changed"].mean()), "dropped": float(final["dropped"].mean()),
            "entropy": float(entropy.detach()),
            "entropy_per_dimension": float(per_dimension), "entropy_coef": float(coef),
            "value_loss": float(value_loss.detach()),
        }
        steps = self.update * cfg.num_envs
        h = self.history
        h.steps.append(steps)
        h.reward.append(metrics["reward"])
        h.invalid.append(metrics["invalid"])
        h.changed.append(metrics["changed"])
        h.dropped.append(metrics["dropped"])
        if cfg.keep_best:
            self._remember_if_best()
        if self.log is not None:
            self.log(steps, metrics)
        return metrics

    @property
    def current_target_entropy(self) -> float:
        cfg = self.config
        if cfg.target_entropy_final is None:
            return float(cfg.target_entropy)
        done = min(1.0, self.update / self.total_updates)
        return float(cfg.target_entropy + done * (cfg.target_entropy_final - cfg.target_entropy))

    def _remember_if_best(self) -> None:
        window = self.config.best_window
        if len(self.history.reward) < window:
            return
        reward = float(np.mean(self.history.reward[-window:]))
        if self.best is None or reward > self.best["reward"]:
            self.best = {
                "reward": reward, "update": self.update,
                "adversary": {k: v.detach().clone() for k, v in self.adversary.state_dict().items()},
                "features": [p.detach().clone() for p in self.cache.parameters()],
            }

    def use_best(self) -> int:
        """Load the kept best policy (when keep_best found one); returns the update it was taken at."""
        if self.best is None:
            return self.update
        self.adversary.load_state_dict(self.best["adversary"])
        with torch.no_grad():
            for param, saved in zip(self.cache.parameters(), self.best["features"], strict=True):
                param.copy_(saved)
        return int(self.best["update"])

    def train(self, progress: Callable[[int], None] | None = None, max_seconds: float | None = None) -> History:
        """Train to `config.steps`, or until `max_seconds` have passed (checkpointed: train again to resume)."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        while self.update < self.total_updates:
            self.step()
            if progress is not None:
                progress(self.config.num_envs)
            if self.update % self.config.checkpoint_every == 0:
                self.save()
            if deadline is not None and time.monotonic() >= deadline:
                break
        self.save()
        return self.history

    @property
    def finished(self) -> bool:
        return self.update >= self.total_updates
