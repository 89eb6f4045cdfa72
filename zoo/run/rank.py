"""This process's global rank as its launcher announced it, read before any process group
exists (0 when not launched as one of several)."""

from __future__ import annotations

import os


def launch_rank() -> int:
    env = os.environ
    for var in ("RANK", "SLURM_PROCID"):
        if env.get(var, "").isdigit():
            if var == "SLURM_PROCID" and int(env.get("SLURM_NTASKS", "1") or 1) < 2:
                return 0
            return int(env[var])
    if env.get("LOCAL_RANK", "").isdigit():  # Lightning's own launcher (one node)
        return int(env.get("NODE_RANK", "0") or 0) * int(env.get("LOCAL_WORLD_SIZE", "0") or 0) + int(env["LOCAL_RANK"])
    return 0
