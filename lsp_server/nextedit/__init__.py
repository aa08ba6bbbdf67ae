"""Next-edit predictions: the edit the person makes next, from the edits just made."""
