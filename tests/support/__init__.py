"""Helpers shared by test packages (scripted servers, fixtures)."""
