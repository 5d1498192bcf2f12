"""What a run is asked to do (scenarios, run configs) and its inputs and outputs, checked before anything loads."""
