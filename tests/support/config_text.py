"""Configuration and content snippets many tests share."""

from __future__ import annotations

LOCAL_OFF = "[local]\nenabled = false\n"
# The AWS documentation's example key ID, built at run time so that no scanner mistakes a
# file for a leaked key.
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
