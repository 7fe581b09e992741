"""Evaluation of policy checkpoints (docs/evaluation.md).

| module | what |
|---|---|
| `evaluation.spec` | protocols (quick, paper), `EvalSpec`, the episode list and its seeds, units of work, the per-episode JSONL, summaries |
| `evaluation.offline` | a batch of episodes in the N worlds of one Twin (no correction, no follower), batched inference, the success rules' clock |
| `evaluation.online` | one episode through the full loop against the stand-in; tracking failures |
| `evaluation.run` | `evaluate(spec, out, executor="local"|"ray")`: units in process or as Ray tasks, resumable |
| `evaluation.stats` | Wilson intervals, two-proportion z and Fisher exact tests, Pearson r, Kendall tau-b, MMRV |
| `evaluation.figures` | success vs checkpoint, offline and online with their intervals (the paper's Fig. 7) |

The PushT success rules (goal tolerances, gym-pusht's coverage) live in the task package
(`real_is_sim_tasks.pusht.success`, `.coverage`) and are imported when an evaluation runs, never at import time.
"""
