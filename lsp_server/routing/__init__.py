"""Choosing an endpoint per request: ranking by live latency, hedging, deadlines,
breakers, offline detection and the decision log.
"""
