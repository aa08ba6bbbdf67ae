"""The OpenAI-compatible HTTP front door on the same router: the app, its HTTP
plumbing, OpenAI's wire shapes and FIM prompt splitting.
"""
