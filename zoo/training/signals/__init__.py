"""A run stopped from outside: SIGTERM and SIGINT (`interrupt`, and `watch`, which learns of one
while the main thread is inside a native call; `command`, zoo-train's answer before and after the
run's own handler) and SLURM's preemption warning (`preemption`), each ending with what the run
saved kept."""
