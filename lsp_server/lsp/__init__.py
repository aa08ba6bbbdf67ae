"""The LSP front door: the pygls server wired to the services, protocol fixes, transports
and documents.
"""
