"""Inline suggestions: prompt windows around the cursor, the router call,
post-processing and the completion cache.
"""
