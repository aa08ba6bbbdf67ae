"""Refactor on request: the prompt for a reasoning model and the answer turned into
minimal text edits.
"""
