"""The `gateway-ls` command line: one module per command, and the tables and exit codes
they share.
"""
