"""The `rlvr train` pipeline: config, data, model, SFT, evaluation, the run folder."""
