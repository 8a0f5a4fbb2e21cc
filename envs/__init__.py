"""Gymnasium environments of the game; importing this package registers `clevr_game/Adversarial-v0`."""

from gymnasium.envs.registration import register, registry

ENV_ID = "clevr_game/Adversarial-v0"

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="envs.adversarial:AdversarialSceneEnv")
