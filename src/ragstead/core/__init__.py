"""Primitives below every layer: whole-file writes a crash cannot tear and private folders (`atomic`), and the
log of every request that leaves the machine (`egress`)."""
