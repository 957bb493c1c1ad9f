"""Classic online deep RL on Gymnasium environments (PPO, DQN, SAC and contextual variants)."""
