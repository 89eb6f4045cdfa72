"""The parts a training run is built from, each from the validated config: the Trainer, the
LightningModule of the task, the data module and the callbacks."""
