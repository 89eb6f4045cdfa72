"""Training on several processes: the strategies (DDP, FSDP2, HSDP), the global batch split over
the devices, replicas that must agree, and the watch that ends every rank when one dies."""
