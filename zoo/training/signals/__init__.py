"""A run stopped from outside: SIGTERM and SIGINT (`interrupt`) and SLURM's preemption warning
(`preemption`), each ending with what the run saved kept."""
