"""Timing and statistics every comparison shares: sync points, the sampler, paired estimates, records."""
