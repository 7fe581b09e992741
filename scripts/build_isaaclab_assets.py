"""Write the Isaac Lab PushT assets of the default task into usd/: pusht_table.usda and pusht_tblock.usda.

    .venv/bin/python scripts/build_isaaclab_assets.py

The env itself does not need them: it generates its assets into a cache (real_is_sim.isaaclab.assets); these copies
are for looking at the block in a USD viewer or Isaac Sim.
"""

from real_is_sim.isaaclab.assets import write_repo_assets
from real_is_sim_tasks.pusht import load_pusht_cfg

if __name__ == "__main__":
    for path in write_repo_assets(load_pusht_cfg()):
        print(path)
