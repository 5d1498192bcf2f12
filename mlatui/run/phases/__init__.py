"""The scenario's phases (sweep, decode and tune, indexer), each scheduled through the sampler."""
