"""Backends: one class per kind of model endpoint, all behind the `Backend` interface."""
