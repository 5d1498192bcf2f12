"""The run: the engine, the two arms, draft sources, the speculative step, the budget."""
