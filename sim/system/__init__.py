"""The system simulation (``make sim``): MemoryX -> SwarmX RTL -> N wafers, training a real network."""
