"""The documentation's reference pages, generated from the code (`python -m docgen DIR`)."""
