"""A run stopped from outside: SIGTERM and SIGINT (`interrupt`, and `watch`, which learns of one
while the main thread is inside a native call) and SLURM's preemption warning (`preemption`),
each ending with what the run saved kept."""
