"""Training on several processes: the strategies (DDP, FSDP2, HSDP), replicas that
must agree, and the watch that ends every rank when one dies."""
