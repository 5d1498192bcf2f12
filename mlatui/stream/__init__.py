"""The event stream between the engine and everything that shows or stores it: events, recordings, sources, sinks."""
