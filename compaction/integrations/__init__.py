"""Adapters that put the engine or the service inside agent frameworks (one module each)."""
