"""What may leave the machine: sensitive paths and the secret rules a prompt is scanned with."""
