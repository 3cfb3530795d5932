"""Chakra execution traces: capture from PyTorch, conversion, synthesis, validation.
Not built yet: see the capture and synthesis issues."""
