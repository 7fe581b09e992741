"""Task packages of real-is-sim (installed as ``real_is_sim_tasks``)."""
