"""What a config may not do: name code outside zoo's allow-list (`targets`) or change Hydra's own
section beyond what zoo allows (`hydra_section`)."""
