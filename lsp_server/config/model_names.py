"""The names a client may give a model, other than an endpoint's: the one list.

`gateway-ls` and `auto` route automatically, `fast`, `reasoning` and `local` are chat task
classes, and `local` names the model in this process; no endpoint may take a name that
routing, status and the gateway's model list use for these (`RESERVED_ENDPOINT_NAMES`). They
are resolved against a configuration in one place, `routing/model_names.py`.
"""

from __future__ import annotations

SERVER_MODEL = "gateway-ls"
AUTO = "auto"
LOCAL = "local"
AUTOMATIC_MODELS = (SERVER_MODEL, AUTO)  # model names that mean "route automatically"
TASK_CLASSES = (AUTO, "fast", "reasoning", LOCAL)
RESERVED_ENDPOINT_NAMES = frozenset({LOCAL, SERVER_MODEL, AUTO})
