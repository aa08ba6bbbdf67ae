"""The configuration: its typed model, the TOML loader with located errors, the file
watcher and the editor's overrides.
"""
