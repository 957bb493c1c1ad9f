"""The application: a whole run (`pipeline`: warm start -> RL -> control -> evaluation -> summary),
`compare` (variants x seeds from one shared warm start), `export` (a run's policy as a plain Hugging Face folder,
LoRA merged) and run-directory resolution (`runs`).

The library packages below it (trainer, runtime, rollout, policy, ...) never import this package."""
