"""Gymnasium environments of the game; importing this package registers `clevr_game/Adversarial-v0`.

`gymnasium.make(ENV_ID)` gives the single env (`envs.adversarial.AdversarialSceneEnv`);
`gymnasium.make_vec(ENV_ID, num_envs=N)` gives the native batched env
(`envs.vector.AdversarialVectorEnv`), which steps N items in numpy and asks the
player once per batch. Both run with no arguments on the shipped sample and player.
"""

from gymnasium.envs.registration import register, registry

ENV_ID = "clevr_game/Adversarial-v0"

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="envs.adversarial:AdversarialSceneEnv",
             vector_entry_point="envs.vector:AdversarialVectorEnv")
