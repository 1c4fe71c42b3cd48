"""One trial, in its own process: the trainable, RLlib's builders (`algos`), the PPO learner,
checkpoints, the trial's device, env runners, CUDA graphs, overlap, RL modules, models,
connectors, augmentations and evaluation. The only layer that imports torch.
"""
