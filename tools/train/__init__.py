"""Rebuild the embedded model: corpus, tokenizer, seeded training, acceptance measurement."""
